package logging

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The access-log line written straight from a request's figures is the
// line Handle writes for its record, byte for byte, whatever the strings
// hold (quotes, control characters, bytes that are not UTF-8), with or
// without attributes the logger was given.
func TestRequestLineIsTheRecordsLine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var fast, slow bytes.Buffer
		var hf, hs slog.Handler = newJSONHandler(&fast, slog.LevelInfo), newJSONHandler(&slow, slog.LevelInfo)
		if rapid.Bool().Draw(t, "with") {
			attrs := []slog.Attr{slog.String("component", rapid.String().Draw(t, "component"))}
			hf, hs = hf.WithAttrs(attrs), hs.WithAttrs(attrs)
		}
		at := time.Unix(rapid.Int64Range(0, 4e9).Draw(t, "unix"), rapid.Int64Range(0, 999_999_999).Draw(t, "ns"))
		status := rapid.IntRange(100, 599).Draw(t, "status")
		method := rapid.SampledFrom([]string{"GET", "POST", "DELETE", "PATCH", "BREW"}).Draw(t, "method")
		route := rapid.String().Draw(t, "route")
		path := string(rapid.SliceOf(rapid.Byte()).Draw(t, "path"))
		ms := float64(rapid.Int64Range(0, 1e13).Draw(t, "us")) / 1000
		id := rapid.String().Draw(t, "id")
		hf.(*jsonHandler).request(at, status, method, route, path, ms, id)
		if err := hs.Handle(context.Background(), requestRecord(at, status, method, route, path, ms, id)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fast.Bytes(), slow.Bytes()) {
			t.Fatalf("straight:\n%s\nrecord:\n%s", fast.Bytes(), slow.Bytes())
		}
	})
}

// appendTime writes what time.RFC3339Nano does, in any zone, for times in
// the same second one after another and for times seconds apart.
func TestAppendTimeIsRFC3339Nano(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("", -7*3600), time.FixedZone("X", 5*3600+1800), time.Local}
	rapid.Check(t, func(t *rapid.T) {
		loc := rapid.SampledFrom(zones).Draw(t, "zone")
		at := time.Unix(rapid.Int64Range(-62135596800, 253402300799).Draw(t, "unix"), 0).In(loc)
		for i, n := 0, rapid.IntRange(1, 5).Draw(t, "times"); i < n; i++ {
			at = at.Add(time.Duration(rapid.Int64Range(0, 2e9).Draw(t, "step")))
			if rapid.Bool().Draw(t, "whole") {
				at = at.Truncate(time.Millisecond)
			}
			got, want := appendTime(nil, at), at.AppendFormat(nil, time.RFC3339Nano)
			if !bytes.Equal(got, want) {
				t.Fatalf("%v: %s, want %s", at, got, want)
			}
		}
	})
}
