package metrics

import "testing"

func TestBitsetSetCountOrEncode(t *testing.T) {
	var a, b Bitset
	for i := int64(0); i < 1000; i += 3 {
		if a.Set(i) {
			t.Fatalf("bit %d reported set before", i)
		}
	}
	if !a.Set(3) {
		t.Error("second Set of 3 did not report a duplicate")
	}
	if a.Count() != 334 || !a.Has(999) || a.Has(998) {
		t.Errorf("count %d", a.Count())
	}
	for i := int64(0); i < 2000; i += 2 {
		b.Set(i)
	}
	if got := b.AndNotCount(&a); got != 1000-167 {
		t.Errorf("b &^ a = %d", got)
	}
	dec, err := DecodeBitset(a.Encode())
	if err != nil || dec.Count() != a.Count() || dec.AndNotCount(&a) != 0 {
		t.Fatalf("round trip: %v", err)
	}
	overlap := dec.Or(&b) // multiples of 6 below 1000
	if overlap != 167 || dec.Count() != 334+1000-167 {
		t.Errorf("overlap %d count %d", overlap, dec.Count())
	}
	if _, err := DecodeBitset("not base64!"); err == nil {
		t.Error("bad input decoded")
	}
}

func TestContiguousBitsetsAreTiny(t *testing.T) {
	var b Bitset
	for i := int64(0); i < 1_000_000; i++ {
		b.Set(i)
	}
	if n := len(b.Encode()); n > 400 {
		t.Errorf("a million delivered messages encode to %d bytes", n)
	}
}

func TestOpWindowsAndCounts(t *testing.T) {
	o := NewOp("post")
	base := int64(1_800_000_000)
	for s := int64(0); s < 3; s++ {
		for i := 0; i < 10; i++ {
			o.Success(unix(base+s), 1500*1000) // 1.5 ms
		}
		o.Failure(unix(base+s), "http_503")
	}
	snap := o.Finish()
	if snap.Requests != 33 || snap.OK != 30 || snap.Errors["http_503"] != 3 || len(snap.Series) != 3 {
		t.Fatalf("snapshot %+v", snap)
	}
	for _, p := range snap.Series {
		if p.N != 10 || p.Err != 1 || p.P99 < 1.49 || p.P99 > 1.51 || p.Hist == "" {
			t.Errorf("point %+v", p)
		}
	}
}
