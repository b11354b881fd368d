package storage

import "strings"

// topicSpace is what a project's name is suffixed with to name the
// namespace its topics live in. A topic is stored as a queue of that
// namespace, so every driver serves topics unchanged, a topic never shows
// in a queue listing (nor the other way round), and a topic and a queue
// may share a name. No client can name the namespace as a project: the
// suffix starts with a control character, which HTTP header values
// cannot carry (net/http refuses such a request) and the API refuses in
// projects from any other source.
const topicSpace = "\x1etopics"

// TopicRef names the topic name of project.
func TopicRef(project, name string) QueueRef {
	return QueueRef{Project: TopicProject(project), Name: name}
}

// TopicProject is the namespace holding project's topics: pass it where a
// project is asked for (QueueStore.List) to list topics.
func TopicProject(project string) string { return project + topicSpace }

// IsTopic reports whether q names a topic, and of which project.
func IsTopic(q QueueRef) (project string, ok bool) {
	return strings.CutSuffix(q.Project, topicSpace)
}

// ReservedProject reports whether a project id could reach another
// project's topics (it holds the namespace separator); callers refuse it.
func ReservedProject(project string) bool {
	return strings.IndexByte(project, topicSpace[0]) >= 0
}
