package metrics

import "time"

func unix(sec int64) time.Time { return time.Unix(sec, 0) }
