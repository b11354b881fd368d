package catalog

import (
	"hash/fnv"
	"math"
)

// choose picks a pool for a queue by weighted rendezvous hashing: each pool
// scores -weight/ln(u) with u uniform in (0,1) drawn from hash(queue, pool),
// and the best score wins. A pool wins a share of queues proportional to its
// weight, weight 0 never wins, and the choice depends only on the queue and
// the pool set - so replicas that race to place a queue propose the same
// pool, and a queue deleted and created again lands where it was as long as
// the pools have not changed.
func choose(key string, pools []Pool) (string, bool) {
	best, bestScore := "", math.Inf(-1)
	for _, p := range pools {
		if p.Weight <= 0 {
			continue
		}
		u := unit(key, p.Name)
		score := -float64(p.Weight) / math.Log(u)
		if score > bestScore || (score == bestScore && p.Name < best) {
			best, bestScore = p.Name, score
		}
	}
	return best, best != ""
}

// unit hashes (key, pool) to a float in (0, 1).
func unit(key, pool string) float64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(pool))
	x := mix64(h.Sum64())
	return (float64(x>>11) + 0.5) / (1 << 53)
}

// mix64 is splitmix64's finalizer: FNV alone leaves similar keys correlated.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
