package instrument

import (
	"context"
	"time"

	"sluice.dev/server/internal/storage"
)

type queues struct {
	s storage.QueueStore
	r *recorder
}

func (x queues) Create(ctx context.Context, q storage.QueueRef, meta storage.Metadata) (bool, error) {
	start := time.Now()
	ok, err := x.s.Create(ctx, q, meta)
	x.r.done(opQueueCreate, start, err)
	return ok, err
}

func (x queues) Exists(ctx context.Context, q storage.QueueRef) (bool, error) {
	start := time.Now()
	ok, err := x.s.Exists(ctx, q)
	x.r.done(opQueueExists, start, err)
	return ok, err
}

func (x queues) GetMetadata(ctx context.Context, q storage.QueueRef) (storage.Metadata, error) {
	start := time.Now()
	m, err := x.s.GetMetadata(ctx, q)
	x.r.done(opQueueGetMetadata, start, err)
	return m, err
}

func (x queues) SetMetadata(ctx context.Context, q storage.QueueRef, meta storage.Metadata) error {
	start := time.Now()
	err := x.s.SetMetadata(ctx, q, meta)
	x.r.done(opQueueSetMetadata, start, err)
	return err
}

func (x queues) UpdateMetadata(ctx context.Context, q storage.QueueRef, update storage.MetadataUpdate) (storage.Metadata, error) {
	start := time.Now()
	m, err := x.s.UpdateMetadata(ctx, q, update)
	x.r.done(opQueueUpdateMetadata, start, err)
	return m, err
}

func (x queues) Delete(ctx context.Context, q storage.QueueRef) error {
	start := time.Now()
	err := x.s.Delete(ctx, q)
	x.r.done(opQueueDelete, start, err)
	return err
}

func (x queues) List(ctx context.Context, project string, opts storage.ListQueuesOptions) ([]storage.QueueInfo, error) {
	start := time.Now()
	if err := checkLimit(storage.OpQueueList, opts.Limit); err != nil {
		x.r.done(opQueueList, start, err)
		return nil, err
	}
	l, err := x.s.List(ctx, project, opts)
	x.r.done(opQueueList, start, err)
	return l, err
}

func (x queues) Stats(ctx context.Context, q storage.QueueRef) (storage.QueueStats, error) {
	start := time.Now()
	st, err := x.s.Stats(ctx, q)
	x.r.done(opQueueStats, start, err)
	return st, err
}

func (x queues) Purge(ctx context.Context, q storage.QueueRef) error {
	start := time.Now()
	err := x.s.Purge(ctx, q)
	x.r.done(opQueuePurge, start, err)
	return err
}

type messages struct {
	s storage.MessageStore
	r *recorder
}

func (x messages) Post(ctx context.Context, q storage.QueueRef, clientID string, msgs []storage.NewMessage) ([]string, error) {
	start := time.Now()
	if err := checkPost(msgs); err != nil {
		x.r.done(opMessagePost, start, err)
		return nil, err
	}
	ids, err := x.s.Post(ctx, q, clientID, msgs)
	x.r.done(opMessagePost, start, err)
	return ids, err
}

func (x messages) List(ctx context.Context, q storage.QueueRef, opts storage.ListMessagesOptions) ([]storage.Message, string, error) {
	start := time.Now()
	if err := checkLimit(storage.OpMessageList, opts.Limit); err != nil {
		x.r.done(opMessageList, start, err)
		return nil, "", err
	}
	l, next, err := x.s.List(ctx, q, opts)
	x.r.done(opMessageList, start, err)
	return l, next, err
}

func (x messages) Get(ctx context.Context, q storage.QueueRef, id string) (storage.Message, error) {
	start := time.Now()
	m, err := x.s.Get(ctx, q, id)
	x.r.done(opMessageGet, start, err)
	return m, err
}

func (x messages) GetMany(ctx context.Context, q storage.QueueRef, ids []string) ([]storage.Message, error) {
	start := time.Now()
	l, err := x.s.GetMany(ctx, q, ids)
	x.r.done(opMessageGetMany, start, err)
	return l, err
}

func (x messages) Delete(ctx context.Context, q storage.QueueRef, id, claimID string) error {
	start := time.Now()
	err := x.s.Delete(ctx, q, id, claimID)
	x.r.done(opMessageDelete, start, err)
	return err
}

// remover is the timed message store of a driver whose deletes say
// whether they removed the message (the pooled driver asks during a move).
type remover struct {
	messages
	rm storage.Remover
}

func (x remover) Remove(ctx context.Context, q storage.QueueRef, id, claimID string) (bool, error) {
	start := time.Now()
	removed, err := x.rm.Remove(ctx, q, id, claimID)
	x.r.done(opMessageDelete, start, err)
	return removed, err
}

func (x messages) DeleteMany(ctx context.Context, q storage.QueueRef, ids []string, claimID string) error {
	start := time.Now()
	err := x.s.DeleteMany(ctx, q, ids, claimID)
	x.r.done(opMessageDeleteMany, start, err)
	return err
}

func (x messages) Pop(ctx context.Context, q storage.QueueRef, limit int) ([]storage.Message, error) {
	start := time.Now()
	if err := checkLimit(storage.OpMessagePop, limit); err != nil {
		x.r.done(opMessagePop, start, err)
		return nil, err
	}
	l, err := x.s.Pop(ctx, q, limit)
	x.r.done(opMessagePop, start, err)
	return l, err
}

type claims struct {
	s storage.ClaimStore
	r *recorder
}

func (x claims) Create(ctx context.Context, q storage.QueueRef, opts storage.ClaimOptions) (storage.Claim, error) {
	start := time.Now()
	if err := checkClaim(opts); err != nil {
		x.r.done(opClaimCreate, start, err)
		return storage.Claim{}, err
	}
	c, err := x.s.Create(ctx, q, opts)
	x.r.done(opClaimCreate, start, err)
	return c, err
}

func (x claims) Get(ctx context.Context, q storage.QueueRef, id string) (storage.Claim, error) {
	start := time.Now()
	c, err := x.s.Get(ctx, q, id)
	x.r.done(opClaimGet, start, err)
	return c, err
}

func (x claims) Update(ctx context.Context, q storage.QueueRef, id string, ttl, grace time.Duration) error {
	start := time.Now()
	if err := checkClaimUpdate(ttl, grace); err != nil {
		x.r.done(opClaimUpdate, start, err)
		return err
	}
	err := x.s.Update(ctx, q, id, ttl, grace)
	x.r.done(opClaimUpdate, start, err)
	return err
}

func (x claims) Delete(ctx context.Context, q storage.QueueRef, id string) error {
	start := time.Now()
	err := x.s.Delete(ctx, q, id)
	x.r.done(opClaimDelete, start, err)
	return err
}
