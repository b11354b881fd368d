package redis

import (
	"context"
	_ "embed"
	"strconv"

	"sluice.dev/server/internal/storage"
)

type messageStore struct{ d *Driver }

var (
	//go:embed post.lua
	postSrc string
	// Concurrent posts to one queue run as one call (post.lua's ARGV).
	postScript = registerMergeable("post", postSrc, 4, true)
)

func (s messageStore) Post(ctx context.Context, q storage.QueueRef, clientID string, msgs []storage.NewMessage) ([]string, error) {
	keys := queueKeys(q)
	a := newScriptArgs(6+3*len(msgs), 2+2*len(msgs), 3)
	a.int(s.d.nowMS())
	a.str(q.Name)
	a.str(keys[0])
	a.raw = newIncarnation()
	a.bytes(a.raw[:])
	a.str(clientID)
	a.int(int64(len(msgs)))
	for _, m := range msgs {
		a.int(m.TTL.Milliseconds())
		a.int(m.Delay.Milliseconds())
		a.bytes(m.Body)
	}
	res, err := postScript.Run(ctx, s.d.fc, keys, a.vals...).Text()
	if err != nil {
		return nil, wrap(storage.OpMessagePost, err)
	}
	// The queue's incarnation, then its first message's seq (post.lua).
	first, perr := strconv.ParseInt(res[min(16, len(res)):], 10, 64)
	if perr != nil || len(res) < 17 || first <= 0 {
		return nil, storage.E(storage.OpMessagePost, storage.Internal, "malformed script reply")
	}
	ids := make([]string, len(msgs))
	for i := range ids {
		ids[i] = messageID(res[:16], first+int64(i))
	}
	return ids, nil
}

var (
	//go:embed list.lua
	listSrc    string
	listScript = register("list", listSrc)
)

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (s messageStore) List(ctx context.Context, q storage.QueueRef, opts storage.ListMessagesOptions) ([]storage.Message, string, error) {
	marker := "0"
	if opts.Marker != "" {
		// A message id is resolved to its position inside the script.
		if _, err := strconv.ParseUint(opts.Marker, 10, 63); err != nil && !storage.IsMessageID(opts.Marker) {
			return nil, "", storage.E(storage.OpMessageList, storage.Invalid, storage.ErrMarker)
		}
		marker = opts.Marker
	}
	res, err := listScript.Run(ctx, s.d.fc, []string{scope(q)}, s.d.nowMS(), marker, opts.Limit, opts.ClientID,
		flag(opts.Echo), flag(opts.IncludeClaimed), flag(opts.IncludeDelayed)).Slice()
	if err != nil {
		return nil, "", wrap(storage.OpMessageList, err)
	}
	if len(res) == 0 {
		return nil, "", storage.E(storage.OpMessageList, storage.Internal, "malformed script reply")
	}
	return parseMessages(res[1:]), toString(res[0]), nil
}

var (
	//go:embed get.lua
	getSrc    string
	getScript = register("get", getSrc)
)

func (s messageStore) Get(ctx context.Context, q storage.QueueRef, id string) (storage.Message, error) {
	if id == "" {
		return storage.Message{}, storage.E(storage.OpMessageGet, storage.NotFound, storage.ErrNoMessage)
	}
	res, err := getScript.Run(ctx, s.d.fc, []string{scope(q)}, s.d.nowMS(), "1", id).Slice()
	if err != nil {
		return storage.Message{}, wrap(storage.OpMessageGet, err)
	}
	msgs := parseMessages(res)
	if len(msgs) == 0 {
		return storage.Message{}, storage.E(storage.OpMessageGet, storage.NotFound, storage.ErrNoMessage)
	}
	return msgs[0], nil
}

func (s messageStore) GetMany(ctx context.Context, q storage.QueueRef, ids []string) ([]storage.Message, error) {
	args := make([]any, 0, 2+len(ids))
	args = append(args, s.d.nowMS(), "0")
	for _, id := range ids {
		if id != "" {
			args = append(args, id)
		}
	}
	if len(args) == 2 {
		return nil, nil
	}
	res, err := getScript.Run(ctx, s.d.fc, []string{scope(q)}, args...).Slice()
	if err != nil {
		return nil, wrap(storage.OpMessageGetMany, err)
	}
	return parseMessages(res), nil
}

var (
	//go:embed delete.lua
	deleteSrc string
	// Concurrent deletes on one queue run as one call (delete.lua).
	deleteScript = registerMergeable("delete", deleteSrc, 1, true)
)

func (s messageStore) Delete(ctx context.Context, q storage.QueueRef, id, claimID string) error {
	_, err := s.Remove(ctx, q, id, claimID)
	return err
}

// Remove is Delete, also saying whether this call removed the message.
func (s messageStore) Remove(ctx context.Context, q storage.QueueRef, id, claimID string) (bool, error) {
	if id == "" {
		return false, nil
	}
	a := newScriptArgs(3, 1, 2)
	a.int(s.d.nowMS())
	a.str(id)
	a.str(claimID)
	res, err := deleteScript.Run(ctx, s.d.fc, []string{scope(q)}, a.vals...).Slice()
	if err != nil {
		return false, wrap(storage.OpMessageDelete, err)
	}
	if len(res) < 2 {
		return false, storage.E(storage.OpMessageDelete, storage.Internal, "malformed script reply")
	}
	s.d.lapsed(toInt(res[0]))
	switch toInt(res[1]) {
	case 1:
		return false, storage.E(storage.OpMessageDelete, storage.Forbidden, storage.ErrClaimed)
	case 2:
		return false, storage.E(storage.OpMessageDelete, storage.Invalid, storage.ErrNotHolder)
	case 3:
		return false, storage.E(storage.OpMessageDelete, storage.Invalid, storage.ErrNotClaimed)
	}
	return len(res) > 2 && toInt(res[2]) == 1, nil
}

var (
	//go:embed delete_many.lua
	deleteManySrc    string
	deleteManyScript = register("delete_many", deleteManySrc)
)

func (s messageStore) DeleteMany(ctx context.Context, q storage.QueueRef, ids []string, claimID string) error {
	args := make([]any, 0, 2+len(ids))
	args = append(args, s.d.nowMS(), claimID)
	for _, id := range ids {
		if id != "" {
			args = append(args, id)
		}
	}
	if len(args) == 2 {
		return nil
	}
	res, err := deleteManyScript.Run(ctx, s.d.fc, []string{scope(q)}, args...).Slice()
	if err != nil {
		return wrap(storage.OpMessageDeleteMany, err)
	}
	if len(res) > 0 {
		s.d.lapsed(toInt(res[0]))
	}
	return nil
}

var (
	//go:embed pop.lua
	popSrc    string
	popScript = register("pop", popSrc)
)

func (s messageStore) Pop(ctx context.Context, q storage.QueueRef, limit int) ([]storage.Message, error) {
	res, err := popScript.Run(ctx, s.d.fc, []string{scope(q)}, s.d.nowMS(), limit).Slice()
	if err != nil {
		return nil, wrap(storage.OpMessagePop, err)
	}
	if len(res) == 0 {
		return nil, storage.E(storage.OpMessagePop, storage.Internal, "malformed script reply")
	}
	s.d.lapsed(toInt(res[0]))
	return parseMessages(res[1:]), nil
}
