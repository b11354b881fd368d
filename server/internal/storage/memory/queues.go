package memory

import (
	"context"

	"sluice.dev/server/internal/storage"
)

type queueStore struct{ d *Driver }

func (s queueStore) Create(_ context.Context, ref storage.QueueRef, meta storage.Metadata) (bool, error) {
	if err := s.d.gone(storage.OpQueueCreate, ref); err != nil {
		return false, err
	}
	q, made := s.d.lockNew(ref, true)
	defer q.mu.Unlock()
	if made {
		q.meta = meta.Clone()
	}
	return made, nil
}

func (s queueStore) Exists(_ context.Context, ref storage.QueueRef) (bool, error) {
	if err := s.d.gone(storage.OpQueueExists, ref); err != nil {
		return false, err
	}
	s.d.mu.RLock()
	defer s.d.mu.RUnlock()
	return s.d.queues[ref] != nil, nil
}

func (s queueStore) GetMetadata(_ context.Context, ref storage.QueueRef) (storage.Metadata, error) {
	if err := s.d.gone(storage.OpQueueGetMetadata, ref); err != nil {
		return nil, err
	}
	q := s.d.lock(ref, false)
	if q == nil {
		return storage.Metadata{}, nil
	}
	defer q.mu.Unlock()
	return q.meta.Clone(), nil
}

func (s queueStore) SetMetadata(_ context.Context, ref storage.QueueRef, meta storage.Metadata) error {
	if err := s.d.gone(storage.OpQueueSetMetadata, ref); err != nil {
		return err
	}
	q := s.d.lock(ref, true)
	defer q.mu.Unlock()
	q.meta = meta.Clone()
	return nil
}

func (s queueStore) Delete(_ context.Context, ref storage.QueueRef) error {
	if err := s.d.gone(storage.OpQueueDelete, ref); err != nil {
		return err
	}
	s.d.drop(ref)
	s.d.mvMu.Lock()
	s.d.forget(ref) // a seal or an import record goes with the queue
	s.d.mvMu.Unlock()
	s.d.notif.purge(ref)
	return nil
}

func (s queueStore) List(_ context.Context, project string, opts storage.ListQueuesOptions) ([]storage.QueueInfo, error) {
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
	if err := s.d.gone(storage.OpQueueStats, ref); err != nil {
		return storage.QueueStats{}, err
	}
	q := s.d.lock(ref, false)
	if q == nil {
		return storage.QueueStats{}, nil
	}
	defer q.mu.Unlock()
	st := storage.QueueStats{Total: len(q.msgs), Claimed: q.claimed}
	if len(q.order) > 0 {
		// trim keeps both ends of order live.
		oldest, newest := q.order[0].snapshot(), q.order[len(q.order)-1].snapshot()
		st.Oldest, st.Newest = &oldest, &newest
	}
	// A batch in transit counts here, after everything left, as listings
	// show it: a queue's depth does not dip while it moves.
	for _, m := range s.d.transitMessages(ref, s.d.clock.Now()) {
		st.Total++
		if m.ClaimID != "" {
			st.Claimed++
		}
		if st.Oldest == nil {
			st.Oldest = &m.Message
		}
		st.Newest = &m.Message
	}
	st.Free = st.Total - st.Claimed
	return st, nil
}

func (s queueStore) Purge(_ context.Context, ref storage.QueueRef) error {
	if err := s.d.gone(storage.OpQueuePurge, ref); err != nil {
		return err
	}
	q := s.d.lock(ref, false)
	if q == nil {
		return nil
	}
	defer q.mu.Unlock()
	q.reset()
	return nil
}

// UpdateMetadata runs update under the queue's lock: nothing else reads or
// writes the metadata in between.
func (s queueStore) UpdateMetadata(_ context.Context, ref storage.QueueRef, update storage.MetadataUpdate) (storage.Metadata, error) {
	if err := s.d.gone(storage.OpQueueUpdateMetadata, ref); err != nil {
		return nil, err
	}
	q := s.d.lock(ref, false)
	if q == nil {
		return nil, storage.E(storage.OpQueueUpdateMetadata, storage.NotFound, nil)
	}
	defer q.mu.Unlock()
	next, err := update(q.meta.Clone())
	if err != nil {
		return nil, err
	}
	if next == nil {
		next = storage.Metadata{}
	}
	q.meta = next.Clone()
	return next, nil
}
