package mongo

import (
	"errors"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"sluice.dev/server/internal/storage"
)

// TestOutOfSpaceIsFull: a server's answer that it is out of space, as a
// command error or inside a write exception, wrapped or not, is Full;
// other server codes stay Internal.
func TestOutOfSpaceIsFull(t *testing.T) {
	for _, c := range []struct {
		code int32
		want storage.Kind
	}{{codeOutOfDiskSpace, storage.Full}, {codeQuotaExceeded, storage.Full}, {2, storage.Internal}, {11000, storage.Internal}} {
		for _, err := range []error{
			mongo.CommandError{Code: c.code, Message: "m"},
			mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: int(c.code), Message: "m"}}},
			fmt.Errorf("insert: %w", mongo.CommandError{Code: c.code}),
		} {
			if got := kindOf(err); got != c.want {
				t.Errorf("code %d as %T: kind %v, want %v", c.code, errors.Unwrap(err), got, c.want)
			}
		}
	}
}
