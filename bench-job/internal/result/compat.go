package result

import "encoding/json"

// fillZaqarBlocks computes zaqar-bench's producer/consumer/observer blocks
// with its key names and its definitions (successful requests over the
// duration; mean latency of successful requests), but from correctly timed
// samples: see docs/sluice-bench.md for where zaqar-bench's differ.
func (r *Result) fillZaqarBlocks() {
	dur := r.Duration
	rate := func(n int64) float64 {
		if dur <= 0 {
			return 0
		}
		return float64(n) / dur
	}
	blockDur := func(on bool) float64 {
		if on {
			return dur
		}
		return 0
	}
	post := r.Ops["post"]
	if post == nil {
		post = &OpResult{}
	}
	r.Producer = map[string]float64{
		"duration_sec":    blockDur(r.Ops["post"] != nil),
		"total_reqs":      float64(post.Requests),
		"successful_reqs": float64(post.OK),
		"reqs_per_sec":    rate(post.OK),
		"ms_per_req":      post.Mean,
	}
	claim, del := r.Ops["claim"], r.Ops["delete"]
	on := claim != nil
	if claim == nil {
		claim = &OpResult{}
	}
	if del == nil {
		del = &OpResult{}
	}
	r.Consumer = map[string]float64{
		"duration_sec":         blockDur(on),
		"total_reqs":           float64(claim.Requests + del.Requests),
		"claim_total_requests": float64(claim.OK),
		"successful_reqs":      float64(claim.OK + del.OK),
		"messages_processed":   float64(del.OK),
		"reqs_per_sec":         rate(claim.OK + del.OK),
		"ms_per_claim":         claim.Mean,
		"ms_per_delete":        del.Mean,
	}
	list := r.Ops["list"]
	if list == nil {
		list = &OpResult{}
	}
	r.Observer = map[string]float64{
		"duration_sec":    blockDur(r.Ops["list"] != nil),
		"total_reqs":      float64(list.Requests),
		"successful_reqs": float64(list.OK),
		"reqs_per_sec":    rate(list.OK),
		"ms_per_req":      list.Mean,
	}
}

// ZaqarJSON renders exactly zaqar-bench's output document: the three
// worker blocks plus its "params" block, nothing else.
func (r *Result) ZaqarJSON() ([]byte, error) {
	type roles struct {
		Producer Role `json:"producer"`
		Consumer Role `json:"consumer"`
		Observer Role `json:"observer"`
	}
	doc := struct {
		Producer map[string]float64 `json:"producer"`
		Consumer map[string]float64 `json:"consumer"`
		Observer map[string]float64 `json:"observer"`
		Params   roles              `json:"params"`
	}{r.Producer, r.Consumer, r.Observer, roles{r.Params.Producer, r.Params.Consumer, r.Params.Observer}}
	return json.Marshal(doc)
}
