package mongo

import (
	"encoding/json"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"sluice.dev/server/internal/storage"
)

// Stored times are Unix milliseconds on the driver's clock; field names are
// short because they are repeated in every document.

// queueDoc is one queue: project, name and the metadata as the client sent it
// (JSON text, so keys with dots or dollars survive).
type queueDoc struct {
	P string `bson:"p"`
	N string `bson:"n"`
	M string `bson:"m"`
	// V counts metadata writes, for UpdateMetadata's compare-and-swap.
	V int64 `bson:"v"`
	// The queue's part in a move (migrate.go); all absent on a queue that
	// never moved, so every other writer leaves them alone.
	Move moveState `bson:",inline"`
}

// moveState is what a queue document records about a move.
type moveState struct {
	MV string `bson:"mv,omitempty"` // sealed: the target every post is sent to
	SS int64  `bson:"ss,omitempty"` // sealed: the sequence reported by Seal
	SE bool   `bson:"se,omitempty"` // sealed: the queue existed before the seal
	TK bool   `bson:"tk,omitempty"` // a batch was taken: the move only goes forward
	TR bool   `bson:"tr,omitempty"` // a batch is (or is being put) in transit
	TB int64  `bson:"tb,omitempty"` // finished: tombstone until then (ms)
	KF int64  `bson:"kf,omitempty"` // target: posts take positions above this
	PM bool   `bson:"pm,omitempty"` // target: Prepare wrote the metadata
}

// msgDoc is one message.
type msgDoc struct {
	ID string    `bson:"_id"`
	P  string    `bson:"p"`  // project
	Q  string    `bson:"q"`  // queue name
	K  int64     `bson:"k"`  // position: FIFO order and paging
	B  string    `bson:"b"`  // body, JSON text
	T  int64     `bson:"t"`  // ttl, ms
	C  int64     `bson:"c"`  // created
	E  int64     `bson:"e"`  // expires
	D  int64     `bson:"d"`  // visible from (delay)
	U  string    `bson:"u"`  // Client-ID of the poster
	CL string    `bson:"cl"` // claim id, "" when never claimed or released
	CE int64     `bson:"ce"` // claim expires
	CC int       `bson:"cc"` // claim count
	V  int64     `bson:"v"`  // version of the claim state
	X  time.Time `bson:"x"`  // wall-clock expiry for the TTL index
}

// claimDoc is one claim; its messages point to it with cl.
type claimDoc struct {
	ID    string    `bson:"_id"`
	P     string    `bson:"p"`
	Q     string    `bson:"q"`
	TTL   int64     `bson:"t"`
	Grace int64     `bson:"g"`
	C     int64     `bson:"c"`
	E     int64     `bson:"e"`
	X     time.Time `bson:"x"`
}

func (m *msgDoc) message(now int64) storage.Message {
	out := storage.Message{
		ID:   m.ID,
		Body: json.RawMessage(m.B),
		// The lifetime as it stands (a claim may have extended it), as
		// every driver reports it.
		TTL:        time.Duration(m.E-m.C) * time.Millisecond,
		Created:    time.UnixMilli(m.C),
		ClientID:   m.U,
		ClaimCount: m.CC,
	}
	if m.D > 0 {
		// As every driver reports it: when it was (or will be) visible,
		// for a message posted with a delay.
		out.DelayUntil = time.UnixMilli(m.D)
	}
	if m.CL != "" && m.CE > now {
		out.ClaimID = m.CL
		out.ClaimExpires = time.UnixMilli(m.CE)
	}
	return out
}

// Filters shared by the stores.

func queueFilter(q storage.QueueRef) bson.D {
	return bson.D{{Key: "p", Value: q.Project}, {Key: "q", Value: q.Name}}
}

func alive(now int64) bson.E { return bson.E{Key: "e", Value: bson.M{"$gt": now}} }

// free matches messages no live claim holds.
func free(now int64) bson.E {
	return bson.E{Key: "$or", Value: bson.A{bson.M{"cl": ""}, bson.M{"ce": bson.M{"$lte": now}}}}
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func decodeMeta(s string) (storage.Metadata, error) {
	meta := storage.Metadata{}
	if s == "" {
		return meta, nil
	}
	err := storage.DecodeMetadata([]byte(s), &meta)
	return meta, err
}
