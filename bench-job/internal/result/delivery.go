package result

import (
	"fmt"

	"sluice.dev/bench/internal/metrics"
)

// Delivery is the end-to-end verification of a run with consumers. With the
// bitsets present every number is exact, also after merging pods that
// shared queues; without them (a truncated termination log) the counts are
// the pods' own and Exact is false.
type Delivery struct {
	Produced   int64 `json:"produced"`        // posts acknowledged with 201
	Consumed   int64 `json:"consumed"`        // claimed messages, duplicates included
	Unique     int64 `json:"unique_consumed"` // distinct produced messages claimed
	Lost       int64 `json:"lost"`            // acknowledged but never claimed
	Duplicated int64 `json:"duplicated"`      // claimed more than once (redeliveries apart)
	// Redelivered: claimed again after their delete failed and their claim
	// expired (at-least-once delivery; a fault's cost, not a defect).
	Redelivered int64     `json:"redelivered"`
	Unacked     int64     `json:"unacknowledged_delivered"`
	Foreign     int64     `json:"foreign"` // claimed messages from other runs
	Exact       bool      `json:"exact"`
	E2E         *OpResult `json:"e2e_post_to_claim"`

	ProducedBits map[string]string `json:"produced_bitsets,omitempty"`
	SeenBits     map[string]string `json:"seen_bitsets,omitempty"`
}

// DeliveryFrom converts a tracker snapshot.
func DeliveryFrom(s metrics.DeliverySnapshot) *Delivery {
	d := &Delivery{Consumed: s.Consumed, Duplicated: s.Duplicated, Redelivered: s.Redelivered, Exact: true,
		ProducedBits: map[string]string{s.Origin: s.Produced.Encode()}, SeenBits: map[string]string{},
		E2E: &OpResult{Requests: s.E2E.TotalCount(), OK: s.E2E.TotalCount(), h: s.E2E}}
	for o, b := range s.Seen {
		d.SeenBits[o] = b.Encode()
	}
	return d
}

func decodeAll(m map[string]string) (map[string]*metrics.Bitset, error) {
	out := make(map[string]*metrics.Bitset, len(m))
	for k, v := range m {
		b, err := metrics.DecodeBitset(v)
		if err != nil {
			return nil, err
		}
		out[k] = b
	}
	return out, nil
}

func (d *Delivery) summarize() error {
	if d.E2E == nil {
		d.E2E = &OpResult{}
	}
	if err := d.E2E.summarize(0); err != nil {
		return err
	}
	if d.ProducedBits == nil {
		d.Exact = false
		return nil
	}
	prod, err := decodeAll(d.ProducedBits)
	if err != nil {
		return err
	}
	seen, err := decodeAll(d.SeenBits)
	if err != nil {
		return err
	}
	d.Produced, d.Unique, d.Lost, d.Unacked, d.Foreign = 0, 0, 0, 0, 0
	for origin, p := range prod {
		d.Produced += p.Count()
		s := seen[origin]
		if s == nil {
			s = &metrics.Bitset{}
		}
		d.Lost += p.AndNotCount(s)
		d.Unacked += s.AndNotCount(p)
		d.Unique += p.Count() - p.AndNotCount(s)
	}
	for origin, s := range seen {
		if prod[origin] == nil {
			d.Foreign += s.Count()
		}
	}
	d.Exact = true
	return nil
}

// merge folds o into d; overlapping claims across pods count as duplicates.
func (d *Delivery) merge(o *Delivery) error {
	d.Consumed += o.Consumed
	d.Duplicated += o.Duplicated
	d.Redelivered += o.Redelivered
	if err := mergeOp(d.E2E, o.E2E); err != nil {
		return err
	}
	// The pods' own counts are kept as the fallback when any input lacks
	// bitsets; with bitsets everywhere summarize recomputes them exactly.
	d.Produced += o.Produced
	d.Lost += o.Lost
	d.Unique += o.Unique
	d.Unacked += o.Unacked
	d.Foreign += o.Foreign
	if d.ProducedBits == nil || o.ProducedBits == nil {
		d.ProducedBits, d.SeenBits = nil, nil
		return nil
	}
	for k, v := range o.ProducedBits {
		if err := orInto(d.ProducedBits, k, v, nil); err != nil {
			return err
		}
	}
	for k, v := range o.SeenBits {
		if err := orInto(d.SeenBits, k, v, &d.Duplicated); err != nil {
			return err
		}
	}
	return nil
}

func orInto(m map[string]string, k, v string, overlap *int64) error {
	b, err := metrics.DecodeBitset(v)
	if err != nil {
		return fmt.Errorf("undecodable delivery bitset of origin %s: %w", k, err)
	}
	if cur, ok := m[k]; ok {
		a, err := metrics.DecodeBitset(cur)
		if err != nil {
			return err
		}
		n := a.Or(b)
		if overlap != nil {
			*overlap += n
		}
		b = a
	}
	m[k] = b.Encode()
	return nil
}
