package mongo_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"sluice.dev/server/internal/storage/mongo"
	"sluice.dev/server/internal/testutil"
)

// TestDocLocksTakeOverADeadHolderOnce: a lock whose holder died (its lease
// over) is taken over by one of the writers waiting for it at once, and
// from then on they write one at a time. Two that both removed the dead
// lock could each remove the other's new one and both get in.
func TestDocLocksTakeOverADeadHolderOnce(t *testing.T) {
	const rounds, writers = 10, 6
	ctx := context.Background()
	u, _ := url.Parse(testutil.StartFerretDB(t).URI("doclocks"))
	client, err := mongo.Connect(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	db := client.Database("doclocks")
	coll := db.Collection("locks")
	locks, err := mongo.NewDocLocks(ctx, db, coll)
	if err != nil {
		t.Fatal(err)
	}
	for round := range rounds {
		id := fmt.Sprintf("doc%d", round)
		dead := bson.D{{Key: "_id", Value: id}, {Key: "h", Value: "dead"}, {Key: "x", Value: time.Now().Add(-time.Second)}}
		if _, err := coll.InsertOne(ctx, dead); err != nil {
			t.Fatal(err)
		}
		var inside, overlaps, wrote atomic.Int32
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				err := locks.Alone(ctx, id, nil, func() error {
					if inside.Add(1) > 1 {
						overlaps.Add(1)
					}
					time.Sleep(3 * time.Millisecond)
					inside.Add(-1)
					wrote.Add(1)
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if overlaps.Load() > 0 || wrote.Load() != writers {
			t.Fatalf("round %d: %d of %d writers wrote, %d of them while another was writing", round, wrote.Load(), writers, overlaps.Load())
		}
		if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
			t.Fatalf("round %d: %d lock documents left (%v), want 0", round, n, err)
		}
	}
}
