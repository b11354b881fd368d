package redis

import (
	"context"
	_ "embed"
	"time"

	"sluice.dev/server/internal/storage"
)

type claimStore struct{ d *Driver }

var (
	//go:embed claim_create.lua
	claimCreateSrc string
	// Concurrent claims on one queue run as one call (claim_create.lua).
	claimCreate = registerMergeable("claim_create", claimCreateSrc, 3, true)
)

func (s claimStore) Create(ctx context.Context, q storage.QueueRef, opts storage.ClaimOptions) (storage.Claim, error) {
	now := s.d.nowMS()
	id := storage.NewID()
	keys := []string{scope(q), "", indexKey(q.Project), registryKey}
	var maxcc, dlTTL int64
	dlq := ""
	if dl := opts.DeadLetter; dl.Active() {
		maxcc, dlq, dlTTL = int64(dl.MaxClaimCount), dl.Queue, dl.TTL.Milliseconds()
	}
	if maxcc > 0 {
		keys[1] = scope(storage.QueueRef{Project: q.Project, Name: dlq})
	}
	a := newScriptArgs(9, 6, 3)
	a.int(now)
	a.str(dlq)
	a.str(keys[1])
	a.str(id)
	a.int(opts.TTL.Milliseconds())
	a.int(opts.Grace.Milliseconds())
	a.int(int64(opts.Limit))
	a.int(maxcc)
	a.int(dlTTL)
	res, err := claimCreate.Run(ctx, s.d.fc, keys, a.vals...).Slice()
	if err != nil {
		return storage.Claim{}, wrap(storage.OpClaimCreate, err)
	}
	if len(res) < 2 {
		return storage.Claim{}, storage.E(storage.OpClaimCreate, storage.Internal, "malformed script reply")
	}
	s.d.lapsed(toInt(res[0]))
	if n := toInt(res[1]); n > 0 {
		s.d.events.DeadLettered(int(n))
	}
	if len(res) == 2 {
		return storage.Claim{}, nil
	}
	return storage.Claim{ID: id, TTL: opts.TTL, Created: msTime(now), Messages: parseMessages(res[2:])}, nil
}

var (
	//go:embed claim_get.lua
	claimGetSrc string
	claimGet    = register("claim_get", claimGetSrc)
)

func (s claimStore) Get(ctx context.Context, q storage.QueueRef, id string) (storage.Claim, error) {
	if id == "" {
		return storage.Claim{}, storage.E(storage.OpClaimGet, storage.NotFound, storage.ErrNoClaim)
	}
	res, err := claimGet.Run(ctx, s.d.fc, []string{scope(q)}, s.d.nowMS(), id).Slice()
	if err != nil {
		return storage.Claim{}, wrap(storage.OpClaimGet, err)
	}
	if len(res) < 2 {
		return storage.Claim{}, storage.E(storage.OpClaimGet, storage.NotFound, storage.ErrNoClaim)
	}
	return storage.Claim{
		ID:       id,
		TTL:      time.Duration(toInt(res[0])) * time.Millisecond,
		Created:  msTime(toInt(res[1])),
		Messages: parseMessages(res[2:]),
	}, nil
}

var (
	//go:embed claim_update.lua
	claimUpdateSrc string
	claimUpdate    = register("claim_update", claimUpdateSrc)
)

func (s claimStore) Update(ctx context.Context, q storage.QueueRef, id string, ttl, grace time.Duration) error {
	if id == "" {
		return storage.E(storage.OpClaimUpdate, storage.NotFound, storage.ErrNoClaim)
	}
	res, err := claimUpdate.Run(ctx, s.d.fc, []string{scope(q)}, s.d.nowMS(), id, ttl.Milliseconds(), grace.Milliseconds()).Slice()
	if err != nil {
		return wrap(storage.OpClaimUpdate, err)
	}
	if len(res) != 2 {
		return storage.E(storage.OpClaimUpdate, storage.Internal, "malformed script reply")
	}
	s.d.lapsed(toInt(res[0]))
	if toInt(res[1]) == 0 {
		return storage.E(storage.OpClaimUpdate, storage.NotFound, storage.ErrNoClaim)
	}
	return nil
}

var (
	//go:embed claim_release.lua
	claimReleaseSrc string
	claimRelease    = register("claim_release", claimReleaseSrc)
)

func (s claimStore) Delete(ctx context.Context, q storage.QueueRef, id string) error {
	if id == "" {
		return nil
	}
	res, err := claimRelease.Run(ctx, s.d.fc, []string{scope(q)}, s.d.nowMS(), id).Slice()
	if err != nil {
		return wrap(storage.OpClaimDelete, err)
	}
	if len(res) > 0 {
		s.d.lapsed(toInt(res[0]))
	}
	return nil
}
