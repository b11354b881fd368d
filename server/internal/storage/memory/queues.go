package memory

import (
	"context"

	"sluice.dev/server/internal/storage"
)

type queueStore struct{ d *Driver }

func (s queueStore) Create(_ context.Context, ref storage.QueueRef, meta storage.Metadata) (bool, error) {
	q, made := s.d.lockNew(ref, true)
	defer q.mu.Unlock()
	if made {
		q.meta = meta.Clone()
	}
	return made, nil
}

func (s queueStore) Exists(_ context.Context, ref storage.QueueRef) (bool, error) {
	s.d.mu.RLock()
	defer s.d.mu.RUnlock()
	return s.d.queues[ref] != nil, nil
}

func (s queueStore) GetMetadata(_ context.Context, ref storage.QueueRef) (storage.Metadata, error) {
	q := s.d.lock(ref, false)
	if q == nil {
		return storage.Metadata{}, nil
	}
	defer q.mu.Unlock()
	return q.meta.Clone(), nil
}

func (s queueStore) SetMetadata(_ context.Context, ref storage.QueueRef, meta storage.Metadata) error {
	q := s.d.lock(ref, true)
	defer q.mu.Unlock()
	q.meta = meta.Clone()
	return nil
}

func (s queueStore) Delete(_ context.Context, ref storage.QueueRef) error {
	s.d.drop(ref)
	s.d.notif.purge(ref)
	return nil
}

func (s queueStore) List(_ context.Context, project string, opts storage.ListQueuesOptions) ([]storage.QueueInfo, error) {
	if opts.Limit <= 0 {
		return nil, storage.E("queues.list", storage.Invalid, "limit must be positive")
	}
	names := s.d.names(project, opts.Marker, opts.Name, opts.Limit)
	out := make([]storage.QueueInfo, 0, len(names))
	for _, name := range names {
		info := storage.QueueInfo{Name: name}
		if opts.Detailed {
			q := s.d.lock(storage.QueueRef{Project: project, Name: name}, false)
			if q == nil {
				continue // deleted since it was listed
			}
			info.Metadata = q.meta.Clone()
			q.mu.Unlock()
		}
		out = append(out, info)
	}
	return out, nil
}

func (s queueStore) Stats(_ context.Context, ref storage.QueueRef) (storage.QueueStats, error) {
	q := s.d.lock(ref, false)
	if q == nil {
		return storage.QueueStats{}, nil
	}
	defer q.mu.Unlock()
	st := storage.QueueStats{Total: len(q.msgs), Claimed: q.claimed}
	st.Free = st.Total - st.Claimed
	if len(q.order) > 0 {
		// trim keeps both ends of order live.
		oldest, newest := q.order[0].snapshot(), q.order[len(q.order)-1].snapshot()
		st.Oldest, st.Newest = &oldest, &newest
	}
	return st, nil
}

func (s queueStore) Purge(_ context.Context, ref storage.QueueRef) error {
	q := s.d.lock(ref, false)
	if q == nil {
		return nil
	}
	defer q.mu.Unlock()
	q.reset()
	return nil
}
