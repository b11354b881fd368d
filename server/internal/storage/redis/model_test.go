package redis_test

import (
	"context"
	"sync/atomic"
	"testing"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/redis"
	"sluice.dev/server/internal/storage/storagetest"
)

// TestModel runs the differential test against the reference model on a
// real redis-server.
func TestModel(t *testing.T) { storagetest.RunModel(t, open, storagetest.ModelOptions{Checks: 200}) }

func TestModelHashLayout(t *testing.T) {
	storagetest.RunModel(t, openLayout("hash"), storagetest.ModelOptions{Checks: 100})
}

// TestModelMixedLayouts runs the model with posts going alternately to the
// stream area and to message hashes of the same queues, as after an
// upgrade from a version without the stream area or during a rolling one:
// every script must serve both areas as one queue, in one order.
func TestModelMixedLayouts(t *testing.T) {
	open := func(t testing.TB, clock storage.Clock) storage.Driver {
		return mixedLayouts{
			Driver: openLayout("stream")(t, clock).(*redis.Driver),
			hash:   openLayout("hash")(t, clock).(*redis.Driver),
			n:      new(atomic.Int64),
		}
	}
	storagetest.RunModel(t, open, storagetest.ModelOptions{Checks: 100})
}

// mixedLayouts is a stream-layout driver whose every other post call goes
// through a hash-layout driver on the same database.
type mixedLayouts struct {
	*redis.Driver
	hash *redis.Driver
	n    *atomic.Int64
}

func (m mixedLayouts) Messages() storage.MessageStore {
	return mixedPosts{MessageStore: m.Driver.Messages(), hash: m.hash.Messages(), n: m.n}
}

type mixedPosts struct {
	storage.MessageStore
	hash storage.MessageStore
	n    *atomic.Int64
}

func (p mixedPosts) Post(ctx context.Context, q storage.QueueRef, clientID string, msgs []storage.NewMessage) ([]string, error) {
	if p.n.Add(1)%2 == 0 {
		return p.hash.Post(ctx, q, clientID, msgs)
	}
	return p.MessageStore.Post(ctx, q, clientID, msgs)
}
