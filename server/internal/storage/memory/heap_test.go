package memory

import (
	"math/rand"
	"sort"
	"testing"
)

type item struct {
	key int
	pos int
}

func newItemHeap() *indexHeap[*item] {
	return &indexHeap[*item]{
		less: func(a, b *item) bool { return a.key < b.key },
		pos:  func(x *item) *int { return &x.pos },
	}
}

// TestIndexHeapAgainstSort drives the heap with random pushes, removals and
// key changes and checks it against a sorted reference.
func TestIndexHeapAgainstSort(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 50; round++ {
		h := newItemHeap()
		live := map[*item]bool{}
		var all []*item
		for step := 0; step < 300; step++ {
			switch op := rng.Intn(4); {
			case op <= 1 || len(all) == 0: // push
				x := &item{key: rng.Intn(100), pos: -1}
				all = append(all, x)
				h.push(x)
				live[x] = true
			case op == 2: // remove (possibly an absent one: must be a no-op)
				x := all[rng.Intn(len(all))]
				h.remove(x)
				delete(live, x)
			default: // change a key
				x := all[rng.Intn(len(all))]
				x.key = rng.Intn(100)
				h.fix(x)
			}
		}
		if h.Len() != len(live) {
			t.Fatalf("round %d: heap holds %d, want %d", round, h.Len(), len(live))
		}
		var want []int
		for x := range live {
			want = append(want, x.key)
		}
		sort.Ints(want)
		for i, k := range want {
			x := h.pop()
			if x.key != k || x.pos != -1 {
				t.Fatalf("round %d: pop %d = key %d pos %d, want key %d pos -1", round, i, x.key, x.pos, k)
			}
		}
	}
}

func TestIndexHeapPushTwiceKeepsOne(t *testing.T) {
	h := newItemHeap()
	x := &item{key: 5, pos: -1}
	h.push(x)
	x.key = 1
	h.push(x) // re-push after a key change acts as fix
	if h.Len() != 1 || h.peek() != x {
		t.Fatalf("len %d after pushing one item twice", h.Len())
	}
	h.clear()
	if h.Len() != 0 || x.pos != -1 {
		t.Fatalf("clear left len %d pos %d", h.Len(), x.pos)
	}
}
