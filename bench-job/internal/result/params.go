package result

// Role is zaqar-bench's processes x workers for one worker type.
type Role struct {
	Processes int `json:"processes"`
	Workers   int `json:"workers"`
}

// Total is the number of concurrent workers the role runs.
func (r Role) Total() int { return r.Processes * r.Workers }

// Params echo the exact parameters of a run. The first three keys are
// zaqar-bench's own "params" block; the rest are sluice-bench's additions.
type Params struct {
	Producer Role `json:"producer"`
	Consumer Role `json:"consumer"`
	Observer Role `json:"observer"`

	Time             int     `json:"time"`
	MessagesPerClaim int     `json:"messages_per_claim"`
	MessagesPerList  int     `json:"messages_per_list"`
	NumQueues        int     `json:"num_queues"`
	QueuePrefix      string  `json:"queue_prefix"`
	MessageSize      int     `json:"message_size,omitempty"`
	LargeSize        int     `json:"large_message_size,omitempty"`
	Rate             float64 `json:"rate,omitempty"`
	Requests         int64   `json:"requests,omitempty"`
	Sweep            []int64 `json:"sweep,omitempty"`
	ClaimTTL         int     `json:"claim_ttl"`
	ClaimGrace       int     `json:"claim_grace"`
	Path             string  `json:"path,omitempty"`
	Subscriber       string  `json:"subscriber,omitempty"` // notifications: the receiver's URL
}
