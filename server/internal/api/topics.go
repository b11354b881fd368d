package api

import (
	"net/http"

	"sluice.dev/server/internal/storage"
)

// Topics are Zaqar's publish side of notifications: a topic takes messages
// and has subscriptions like a queue, but is listed apart and knows no
// claims. sluice stores a topic as a queue in the topic namespace of its
// project (storage.TopicRef), so the queue handlers serve topics too: a
// Call under /v2/topics resolves its ref, hrefs and wording to the topic.

var errBadTopic = &apiError{http.StatusBadRequest, "Invalid topic identification",
	"The format of the submitted topic name or project id is not valid."}

// space is the namespace the call's queues live in: the project, or its
// topic namespace.
func (c *Call) space() string {
	if c.topic {
		return storage.TopicProject(c.Project)
	}
	return c.Project
}

// pathOf is the path of the named queue or topic, the base of its hrefs.
func (c *Call) pathOf(name string) string {
	if c.topic {
		return "/v2/topics/" + name
	}
	return queuePath(name)
}

// base is the path of the call's queue or topic.
func (c *Call) base() string { return c.pathOf(c.queue) }

// collection is the listing's member name.
func (c *Call) collection() string {
	if c.topic {
		return "topics"
	}
	return "queues"
}

// noun names the resource in messages ("Topic t does not exist ...").
func (c *Call) noun() string {
	if c.topic {
		return "Topic"
	}
	return "Queue"
}

// reserved are the metadata keys answered with defaults when unset.
func (c *Call) reserved() []string {
	if c.topic {
		return topicReservedKeys
	}
	return reservedKeys
}

// getTopic: GET /v2/topics/{topic_name}. Unlike a queue, a topic that was
// never created is not found, as in Zaqar.
func (s *Server) getTopic(w http.ResponseWriter, r *http.Request, c *Call) {
	const what = "Topic metadata could not be retrieved."
	q := c.ref()
	ok, err := s.drv.Queues().Exists(c.ctx, q)
	if err != nil {
		s.fail(w, storageErr(err, what, ""))
		return
	}
	if !ok {
		s.fail(w, notFound(queueMissing(c)))
		return
	}
	meta, err := s.drv.Queues().GetMetadata(c.ctx, q)
	if err != nil {
		s.fail(w, storageErr(err, what, queueMissing(c)))
		return
	}
	b, err := s.appendMetadataOf(c.w.out[:0], meta, topicReservedKeys)
	if err != nil {
		s.fail(w, storageErr(err, what, ""))
		return
	}
	c.w.out = b
	writeRaw(w, http.StatusOK, b)
}

// routesTopics mounts Zaqar v2's /v2/topics routes over the queue and
// subscription handlers.
func (s *Server) routesTopics() {
	s.Handle("GET", "/v2/topics", Project, s.listQueues)
	const t = "/v2/topics/{topic_name}"
	s.Handle("PUT", t, Project, s.putQueue)
	s.Handle("GET", t, Project, s.getTopic)
	s.Handle("PATCH", t, Project, s.patchQueue)
	s.Handle("DELETE", t, Project, s.deleteQueue)
	s.Handle("GET", t+"/stats", Project, s.queueStats)
	s.Handle("POST", t+"/purge", Project, s.purgeQueue)

	s.Handle("POST", t+"/messages", Project, s.postMessages)
	s.Handle("GET", t+"/messages", Project, s.listMessages)
	s.Handle("DELETE", t+"/messages", Project, s.deleteMessages)
	s.Handle("GET", t+"/messages/{message_id}", Project, s.getMessage)
	s.Handle("DELETE", t+"/messages/{message_id}", Project, s.deleteMessage)

	// Subscriptions of a topic are those of its ref: delivery, purge and
	// expiry work as for a queue's.
	s.routesSubscriptions(t)
}
