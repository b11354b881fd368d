package pooling

import (
	"context"

	"sluice.dev/server/internal/storage"
)

type messageStore struct{ d *Driver }

// Post places the queue on its first write.
func (s messageStore) Post(ctx context.Context, q storage.QueueRef, clientID string, msgs []storage.NewMessage) ([]string, error) {
	drv, _, err := s.d.route(ctx, q, true, "")
	if err != nil {
		return nil, err
	}
	return drv.Messages().Post(ctx, q, clientID, msgs)
}

// List asks the queue's pool.
func (s messageStore) List(ctx context.Context, q storage.QueueRef, o storage.ListMessagesOptions) ([]storage.Message, string, error) {
	drv, _, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return nil, "", err
	}
	return drv.Messages().List(ctx, q, o)
}

// Get asks the queue's pool.
func (s messageStore) Get(ctx context.Context, q storage.QueueRef, id string) (storage.Message, error) {
	drv, _, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return storage.Message{}, err
	}
	return drv.Messages().Get(ctx, q, id)
}

// GetMany asks the queue's pool.
func (s messageStore) GetMany(ctx context.Context, q storage.QueueRef, ids []string) ([]storage.Message, error) {
	drv, _, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return nil, err
	}
	return drv.Messages().GetMany(ctx, q, ids)
}

// Delete asks the queue's pool.
func (s messageStore) Delete(ctx context.Context, q storage.QueueRef, id, claimID string) error {
	drv, _, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return err
	}
	return drv.Messages().Delete(ctx, q, id, claimID)
}

// DeleteMany asks the queue's pool.
func (s messageStore) DeleteMany(ctx context.Context, q storage.QueueRef, ids []string, claimID string) error {
	drv, _, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return err
	}
	return drv.Messages().DeleteMany(ctx, q, ids, claimID)
}

// Pop asks the queue's pool.
func (s messageStore) Pop(ctx context.Context, q storage.QueueRef, limit int) ([]storage.Message, error) {
	drv, _, err := s.d.route(ctx, q, false, "")
	if err != nil {
		return nil, err
	}
	return drv.Messages().Pop(ctx, q, limit)
}
