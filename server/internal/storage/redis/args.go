package redis

// scriptArgs builds the arguments of a hot-path script call (post, claim,
// delete). Numbers and strings go to go-redis as pointers into two slices,
// which go-redis writes as the values they point at: an int64 or a string
// boxed in an interface costs an allocation apiece, about ten per
// one-message post (docs/benchmarks.md). A slice that grows past its
// capacity moves, but the pointers already handed out keep the old array,
// and its values, alive.
type scriptArgs struct {
	vals []any
	ints []int64
	strs []string
	raw  [8]byte // a post's incarnation candidate, sent from here without a copy
}

// newScriptArgs sizes the lists for n arguments, ints of them numbers and
// strs strings.
func newScriptArgs(n, ints, strs int) *scriptArgs {
	return &scriptArgs{vals: make([]any, 0, n), ints: make([]int64, 0, ints), strs: make([]string, 0, strs)}
}

func (a *scriptArgs) int(v int64) {
	a.ints = append(a.ints, v)
	a.vals = append(a.vals, &a.ints[len(a.ints)-1])
}

func (a *scriptArgs) str(v string) {
	a.strs = append(a.strs, v)
	a.vals = append(a.vals, &a.strs[len(a.strs)-1])
}

// bytes adds b as it is: go-redis writes a []byte without a copy.
func (a *scriptArgs) bytes(b []byte) { a.vals = append(a.vals, b) }
