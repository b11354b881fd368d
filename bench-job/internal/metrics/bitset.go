package metrics

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"io"
	"math/bits"
)

// Bitset marks message sequence numbers. Runs of delivered messages are
// long runs of ones, which compress to almost nothing, so a pod can ship
// its bitsets in a 4 KB termination message and merges stay exact.
type Bitset struct{ w []uint64 }

// Set marks i and reports whether it was already set.
func (b *Bitset) Set(i int64) bool {
	k := int(i >> 6)
	if k >= len(b.w) {
		n := make([]uint64, k+1, 2*(k+1))
		copy(n, b.w)
		b.w = n
	}
	m := uint64(1) << (uint(i) & 63)
	was := b.w[k]&m != 0
	b.w[k] |= m
	return was
}

// Has reports whether i is set.
func (b *Bitset) Has(i int64) bool {
	k := int(i >> 6)
	return k < len(b.w) && b.w[k]&(uint64(1)<<(uint(i)&63)) != 0
}

// Count returns the number of set bits.
func (b *Bitset) Count() int64 {
	var n int
	for _, w := range b.w {
		n += bits.OnesCount64(w)
	}
	return int64(n)
}

// Or sets every bit of o in b and returns how many were set in both.
func (b *Bitset) Or(o *Bitset) (overlap int64) {
	if len(o.w) > len(b.w) {
		n := make([]uint64, len(o.w))
		copy(n, b.w)
		b.w = n
	}
	for i, w := range o.w {
		overlap += int64(bits.OnesCount64(b.w[i] & w))
		b.w[i] |= w
	}
	return overlap
}

// AndNotCount counts bits set in b but not in o.
func (b *Bitset) AndNotCount(o *Bitset) int64 {
	var n int64
	for i, w := range b.w {
		if i < len(o.w) {
			w &^= o.w[i]
		}
		n += int64(bits.OnesCount64(w))
	}
	return n
}

// Encode returns the bitset as base64(zlib(little-endian words)).
func (b *Bitset) Encode() string {
	var buf bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&buf, zlib.BestCompression)
	var word [8]byte
	for _, w := range b.w {
		binary.LittleEndian.PutUint64(word[:], w)
		zw.Write(word[:])
	}
	zw.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// DecodeBitset reverses Encode.
func DecodeBitset(s string) (*Bitset, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	zr, err := zlib.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(zr, 1<<30))
	if err != nil {
		return nil, err
	}
	b := &Bitset{w: make([]uint64, len(data)/8)}
	for i := range b.w {
		b.w[i] = binary.LittleEndian.Uint64(data[i*8:])
	}
	return b, nil
}
