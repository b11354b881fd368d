package memory

// indexHeap is a binary min-heap that records each element's position in the
// element itself, so an element can be removed or re-prioritised in
// O(log n) the moment it is deleted or claimed. Lazy heaps that drop stale
// entries only when they reach the top would keep deleted messages alive
// until their TTL ran out, which would make memory grow with throughput.
type indexHeap[T any] struct {
	items []T
	less  func(a, b T) bool
	pos   func(T) *int // the element's slot for this heap; -1 when absent
}

func (h *indexHeap[T]) Len() int { return len(h.items) }

// peek returns the smallest element; the heap must not be empty.
func (h *indexHeap[T]) peek() T { return h.items[0] }

// push adds x, or restores its position if it is already in the heap.
func (h *indexHeap[T]) push(x T) {
	if p := h.pos(x); *p >= 0 {
		h.fix(x)
		return
	}
	*h.pos(x) = len(h.items)
	h.items = append(h.items, x)
	h.up(len(h.items) - 1)
}

// pop removes and returns the smallest element; the heap must not be empty.
func (h *indexHeap[T]) pop() T {
	x := h.items[0]
	h.remove(x)
	return x
}

// remove takes x out of the heap if it is there.
func (h *indexHeap[T]) remove(x T) {
	i := *h.pos(x)
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	var zero T
	h.items[last] = zero // let the collector reclaim removed elements
	h.items = h.items[:last]
	*h.pos(x) = -1
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
}

// fix restores heap order after x's key changed.
func (h *indexHeap[T]) fix(x T) {
	i := *h.pos(x)
	if i < 0 {
		return
	}
	if !h.down(i) {
		h.up(i)
	}
}

// clear empties the heap, marking every element absent.
func (h *indexHeap[T]) clear() {
	for _, x := range h.items {
		*h.pos(x) = -1
	}
	h.items = nil
}

func (h *indexHeap[T]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.pos(h.items[i]) = i
	*h.pos(h.items[j]) = j
}

func (h *indexHeap[T]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(h.items[i], h.items[parent]) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down sinks element i and reports whether it moved.
func (h *indexHeap[T]) down(i int) bool {
	start, n := i, len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			j = r
		}
		if !h.less(h.items[j], h.items[i]) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > start
}
