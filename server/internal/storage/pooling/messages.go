package pooling

import (
	"context"
	"errors"

	"sluice.dev/server/internal/storage"
)

type messageStore struct{ d *Driver }

// Post places the queue on its first write. During a move posts go to the
// target, once it is prepared.
func (s messageStore) Post(ctx context.Context, q storage.QueueRef, clientID string, msgs []storage.NewMessage) (ids []string, err error) {
	err = s.d.do(ctx, q, true, "", func(r routed) (err error) {
		drv := r.drv
		if r.sealing() {
			return errSealing
		} else if r.moving {
			drv = r.dst
		}
		ids, err = drv.Messages().Post(ctx, q, clientID, msgs)
		return err
	})
	return ids, err
}

// List asks the queue's pool. During a move it lists the source's messages
// (the older ones, the batch in transit last), then the target's after the
// last one listed. Every marker it hands out names the pool that made it
// (listmarker.go), so a listing goes on across a move that starts or ends
// between its pages.
func (s messageStore) List(ctx context.Context, q storage.QueueRef, o storage.ListMessagesOptions) (msgs []storage.Message, next string, err error) {
	at := parseListMarker(o.Marker)
	err = s.d.do(ctx, q, false, "", func(r routed) (err error) {
		o := o
		msgs, next = nil, ""
		lastID := at.lastID
		if !r.moving || !(at.inTarget || at.madeBy(r.mig.To)) {
			o.Marker = at.on(r.pool)
			msgs, next, err = r.drv.Messages().List(ctx, q, o)
			if r.moving && movedErr(err) {
				msgs, next, err = nil, "", nil
			}
			if err != nil {
				return err
			}
			if len(msgs) > 0 {
				lastID = msgs[len(msgs)-1].ID
			}
			if next != "" {
				// The pool has more (a full page, or one its scan budget
				// cut short).
				next = poolListMarker(r.pool, lastID, next)
				return nil
			}
			if !r.moving {
				return nil
			}
			// On the target, resume after the last message listed: it is
			// there when it moved since, and then so did everything after it.
			o.Marker = lastID
			o.Limit -= len(msgs) // more than 0: a full page names its end
		} else {
			o.Marker = at.marker
		}
		more, tnext, err := r.dst.Messages().List(ctx, q, o)
		if err != nil && !storage.Is(err, storage.NotFound) {
			return err
		}
		msgs = append(msgs, more...)
		if len(more) > 0 {
			lastID = more[len(more)-1].ID
		}
		if tnext != "" {
			next = poolListMarker(r.mig.To, lastID, tnext)
		}
		return nil
	})
	return msgs, next, err
}

// Get asks the queue's pool; during a move, the source and then the target.
func (s messageStore) Get(ctx context.Context, q storage.QueueRef, id string) (m storage.Message, err error) {
	err = s.d.do(ctx, q, false, "", func(r routed) (err error) {
		m, err = r.drv.Messages().Get(ctx, q, id)
		if r.moving && elsewhere(err) {
			m, err = r.dst.Messages().Get(ctx, q, id)
		}
		return err
	})
	return m, err
}

// GetMany asks the queue's pool; during a move, the source, then the
// target for the ids the source did not have.
func (s messageStore) GetMany(ctx context.Context, q storage.QueueRef, ids []string) (out []storage.Message, err error) {
	err = s.d.do(ctx, q, false, "", func(r routed) (err error) {
		out, err = r.drv.Messages().GetMany(ctx, q, ids)
		if !r.moving {
			return err
		}
		if movedErr(err) {
			out, err = nil, nil
		}
		if err != nil {
			return err
		}
		found := make(map[string]bool, len(out))
		for _, m := range out {
			found[m.ID] = true
		}
		var rest []string
		for _, id := range ids {
			if !found[id] {
				rest = append(rest, id)
			}
		}
		if len(rest) == 0 {
			return nil
		}
		more, err := r.dst.Messages().GetMany(ctx, q, rest)
		out = append(out, more...)
		return err
	})
	return out, err
}

// Delete asks the queue's pool; during a move, the source and then the
// target (deleting an absent message is not an error on either), unless
// the source removed it: a message visible on the source is at home there,
// and no other backend holds a copy of it (docs/pooling.md, "The
// invariant"), so the second round trip, half of what a delete costs
// during a move, is skipped for the messages that have not moved yet.
func (s messageStore) Delete(ctx context.Context, q storage.QueueRef, id, claimID string) error {
	return s.d.do(ctx, q, false, "", func(r routed) error {
		if !r.moving {
			return r.drv.Messages().Delete(ctx, q, id, claimID)
		}
		var err error
		if rm, ok := r.drv.Messages().(storage.Remover); ok {
			var removed bool
			if removed, err = rm.Remove(ctx, q, id, claimID); err == nil && removed {
				return nil
			}
		} else {
			err = r.drv.Messages().Delete(ctx, q, id, claimID)
		}
		switch {
		case err == nil || movedErr(err):
			return r.dst.Messages().Delete(ctx, q, id, claimID)
		case claimRefusal(err):
			// The source may judge the claim id before it finds the
			// message absent; the refusal stands only if the target
			// does not hold the message.
			if _, gerr := r.dst.Messages().Get(ctx, q, id); gerr == nil {
				return r.dst.Messages().Delete(ctx, q, id, claimID)
			}
		}
		return err
	})
}

// claimRefusal reports a delete refused for its claim id.
func claimRefusal(err error) bool {
	return errors.Is(err, storage.ErrNotHolder) || errors.Is(err, storage.ErrNotClaimed) || errors.Is(err, storage.ErrClaimed)
}

// DeleteMany asks the queue's pool; during a move, both, as Delete.
func (s messageStore) DeleteMany(ctx context.Context, q storage.QueueRef, ids []string, claimID string) error {
	return s.d.do(ctx, q, false, "", func(r routed) error {
		if !r.moving {
			return r.drv.Messages().DeleteMany(ctx, q, ids, claimID)
		}
		del := func(drv storage.Driver) error { return drv.Messages().DeleteMany(ctx, q, ids, claimID) }
		return bothWays(r, del, del)
	})
}

// Pop asks the queue's pool; during a move, the source first (its messages
// are the older), the target only when the source had none.
func (s messageStore) Pop(ctx context.Context, q storage.QueueRef, limit int) (out []storage.Message, err error) {
	err = s.d.do(ctx, q, false, "", func(r routed) (err error) {
		out, err = r.drv.Messages().Pop(ctx, q, limit)
		if r.moving && (movedErr(err) || err == nil && len(out) == 0) {
			out, err = r.dst.Messages().Pop(ctx, q, limit)
		}
		return err
	})
	return out, err
}
