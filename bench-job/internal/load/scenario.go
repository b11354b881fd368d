package load

import (
	"fmt"
	"sort"

	"sluice.dev/bench/internal/result"
)

// Preset is a named scenario with the exact parameters of its seed report.
type Preset struct {
	Name        string
	Kind        Kind
	Params      result.Params
	Verify      bool
	Seed        string // where the parameters come from
	Description string
}

func role(p, w int) result.Role { return result.Role{Processes: p, Workers: w} }

// zaqarDefaults are zaqar-bench's own option defaults.
func zaqarDefaults() result.Params {
	return result.Params{Producer: role(1, 10), Consumer: role(1, 0), Observer: role(1, 5),
		Time: 5, MessagesPerClaim: 5, MessagesPerList: 5, NumQueues: 4, QueuePrefix: "ogre-test-queue",
		ClaimTTL: 300, ClaimGrace: 200}
}

// seed000 is the Juno round-2 setup: ~1K sample message (1398 bytes), 4
// queues, 10-second runs.
func seed000(pp, pw, cp, cw, op, ow, lno, qno int) result.Params {
	p := zaqarDefaults()
	p.Producer, p.Consumer, p.Observer = role(pp, pw), role(cp, cw), role(op, ow)
	p.MessagesPerList, p.NumQueues, p.Time, p.MessageSize = lno, qno, 10, 1398
	return p
}

// Presets lists every scenario by name.
var Presets = map[string]Preset{
	"custom": {Name: "custom", Kind: KindZaqar, Params: zaqarDefaults(),
		Seed: "zaqar-bench defaults", Description: "zaqar-bench's own defaults; set -pp -pw -cp -cw -op -ow yourself"},
	"event-broadcasting-read-heavy": {Name: "event-broadcasting-read-heavy", Kind: KindZaqar,
		Params: seed000(1, 5, 0, 0, 2, 25, 5, 4), Seed: "000 Event Broadcasting (Read-Heavy)",
		Description: "1x5 producers, 2x25 observers listing 5, 4 queues, 10 s"},
	"event-broadcasting-balanced": {Name: "event-broadcasting-balanced", Kind: KindZaqar,
		Params: seed000(2, 25, 0, 0, 2, 25, 5, 4), Seed: "000 Event Broadcasting (Balanced)",
		Description: "2x25 producers, 2x25 observers listing 5, 4 queues, 10 s"},
	"point-to-point": {Name: "point-to-point", Kind: KindZaqar,
		Params: seed000(1, 1, 0, 0, 1, 1, 1, 1), Seed: "000 Point-to-Point Messaging",
		Description: "1x1 producer, 1x1 observer listing 1, one queue, 10 s"},
	"task-distribution": {Name: "task-distribution", Kind: KindZaqar, Verify: true,
		Params: seed000(2, 25, 2, 25, 0, 0, 5, 4), Seed: "000 Task Distribution",
		Description: "2x25 producers, 2x25 consumers claiming 5 then deleting one by one, 4 queues, 10 s; lost/duplicated verified"},
	"auditing": {Name: "auditing", Kind: KindZaqar, Verify: true,
		Params: seed000(2, 25, 2, 25, 1, 5, 5, 4), Seed: "000 Auditing / Diagnostics",
		Description: "task distribution plus 1x5 observers listing 5; lost/duplicated verified"},
	"flood": {Name: "flood", Kind: KindFlood, Verify: true, Params: func() result.Params {
		p := zaqarDefaults()
		p.Producer, p.Consumer, p.Observer = role(0, 0), role(0, 0), role(0, 0)
		p.NumQueues, p.MessagesPerClaim, p.Time = 1, 1, 5
		p.Sweep = []int64{1, 2, 5, 10, 50, 100, 200, 400}
		return p
	}(), Seed: "004 Queue Flooding (Darner): 1..10000 connections",
		Description: "per connection count: post one, claim one, delete it, through one empty queue; 5 s per step"},
	"packing": {Name: "packing", Kind: KindPacking, Params: func() result.Params {
		p := zaqarDefaults()
		p.Producer, p.Consumer, p.Observer = role(1, 10), role(0, 0), role(0, 0)
		p.NumQueues, p.MessagesPerClaim, p.Time, p.MessageSize = 1, 1, 5, 4096
		p.Sweep = []int64{0, 4096, 16384, 65536}
		return p
	}(), Seed: "004 Queue Packing (Darner): backlog 0..16777216",
		Description: "flood throughput with 10 connections as the backlog grows (4 KB items); 5 s per step"},
	"fairness": {Name: "fairness", Kind: KindFairness, Params: func() result.Params {
		p := zaqarDefaults()
		p.Producer, p.Consumer, p.Observer = role(1, 10), role(0, 0), role(0, 0)
		p.NumQueues, p.Time, p.MessageSize, p.LargeSize, p.Requests = 1, 300, 87, 200_000, 100_000
		return p
	}(), Seed: "004 Fairness (Darner): concurrency 10, 100000 sets",
		Description: "100000 small posts from 10 connections measured while one connection posts 200 KB messages"},
	"notifications": {Name: "notifications", Kind: KindNotify, Verify: true, Params: func() result.Params {
		p := zaqarDefaults()
		p.Producer, p.Consumer, p.Observer = role(1, 10), role(0, 0), role(0, 0)
		p.NumQueues, p.Time, p.Rate = 1, 10, 100
		return p
	}(), Seed: "issue 12: Zaqar subscriptions (webhook notifications)",
		Description: "1x10 producers posting 100/s to one queue a built-in webhook receiver subscribes to; ack -> webhook latency, lost/duplicated notifications"},
	"http-baseline": {Name: "http-baseline", Kind: KindHTTP, Params: func() result.Params {
		p := zaqarDefaults()
		p.Producer, p.Consumer, p.Observer = role(1, 10), role(0, 0), role(0, 0)
		p.Time, p.Path = 10, "/"
		return p
	}(), Seed: "002 Burrow echo test, 003 iPerf baseline",
		Description: "GET one URL (a no-op endpoint, or /v2/ping) with -pw workers: the HTTP path's ceiling"},
}

// LookupPreset returns a preset by name.
func LookupPreset(name string) (Preset, error) {
	p, ok := Presets[name]
	if !ok {
		return Preset{}, fmt.Errorf("unknown scenario %q (see sluice-bench scenarios)", name)
	}
	p.Params.Sweep = append([]int64(nil), p.Params.Sweep...)
	return p, nil
}

// PresetNames lists the scenario names, sorted.
func PresetNames() []string {
	var n []string
	for k := range Presets {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
