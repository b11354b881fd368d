package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"sluice.dev/bench/internal/fault"
	"sluice.dev/bench/internal/testenv"
)

const fillMaxmemory = 20 << 20 // --maxmemory 20mb

// fillRun is `sluice-bench fault fill` running in the test's process.
type fillRun struct {
	out, errb lineBuffer
	done      chan struct{}
	code      int
}

func startFill(args ...string) *fillRun {
	r := &fillRun{done: make(chan struct{})}
	go func() {
		r.code = realMain(append([]string{"fault", "fill"}, args...), &r.out, &r.errb)
		close(r.done)
	}()
	return r
}

func (r *fillRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
		return r.code
	case <-time.After(60 * time.Second):
		t.Fatalf("fill still runs after 60s\nstdout: %s\nstderr: %s", r.out.String(), r.errb.String())
	}
	return -1
}

// fillKeys counts the filler keys left, with SCAN as an operator would.
func fillKeys(t *testing.T, c *redis.Client) int {
	t.Helper()
	n := 0
	iter := c.Scan(context.Background(), 0, "sluice-fault:*", 1000).Iterator()
	for i := 0; iter.Next(context.Background()) && i < 1_000_000; i++ {
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

func usedMemory(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no used_memory in INFO memory")
	return 0
}

func TestFaultFillFillsTheShardThenEmptiesIt(t *testing.T) {
	ctx := context.Background()
	port := testenv.FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	faultRedis(t, nil, "127.0.0.1", port, addr,
		"--maxmemory", "20mb", "--maxmemory-policy", "noeviction", "--requirepass", "s3cret")
	t.Setenv("REDIS_PASSWORD", "s3cret")
	c := redisClient(t, &redis.Options{Addr: addr, Password: "s3cret", MaxRetries: -1})
	if err := c.Set(ctx, "sluice:x", "the server's own", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// What a fill killed before its undo leaves behind.
	if err := c.Set(ctx, fault.FillKeyPrefix+"999999", "stale", 0).Err(); err != nil {
		t.Fatal(err)
	}
	tl := emptyTermLog(t)

	run := startFill("--port", strconv.Itoa(port), "--duration", "3s", "--termination-log", tl)
	inj := run.out.waitLine(t, "injected", 30*time.Second, run.done, run.errb.String)
	if inj["full"] != true || inj["filledUntil"] != "oom" || number(t, inj, "maxmemory") != fillMaxmemory {
		t.Fatalf("injected line %v, want full at an OOM answer of maxmemory %d", inj, fillMaxmemory)
	}
	keys, filled := number(t, inj, "keys"), number(t, inj, "bytes")
	if keys < 100 || filled < fillMaxmemory*3/4 || filled > fillMaxmemory {
		t.Fatalf("injected line %v: not the 20 MiB of filler keys a 20 MiB maxmemory takes", inj)
	}
	// While it holds, a post is refused as Redis refuses any write when
	// full, at its start and later on (after Redis' idle-client upkeep).
	for i, at := range []time.Duration{0, 1500 * time.Millisecond} {
		time.Sleep(at)
		err := c.Set(ctx, "sluice:post", strings.Repeat("p", 200), 0).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "OOM") {
			t.Fatalf("SET %d while full: %v, want an OOM error", i, err)
		}
	}
	if used := usedMemory(t, c); used < fillMaxmemory*95/100 {
		t.Fatalf("used_memory %d while full, want close to maxmemory %d", used, fillMaxmemory)
	}

	if code := run.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, run.errb.String())
	}
	undone := run.out.line("undone")
	if undone == nil || undone["stoppedBy"] != "duration" || number(t, undone, "keysRemoved") < keys ||
		number(t, undone, "staleKeysRemoved") != 1 {
		t.Fatalf("undone line %v, want %v keys and the stale one removed", undone, keys)
	}
	if n := fillKeys(t, c); n != 0 {
		t.Fatalf("%d filler keys remain", n)
	}
	if v, err := c.Get(ctx, "sluice:x").Result(); err != nil || v != "the server's own" {
		t.Fatalf("sluice:x is %q (%v), want it untouched", v, err)
	}
	if err := c.Set(ctx, "sluice:post", "p", 0).Err(); err != nil {
		t.Fatalf("SET after the fill: %v", err)
	}
	checkTermLog(t, tl, `^filled \d+ keys \(\d+(\.\d)? MiB\) to used_memory \d+% of maxmemory 20 MiB for \d+(\.\d)?s, then removed them\n$`)
}

// The shards a fill must refuse: without maxmemory it would grow until
// the container is killed, with an evicting policy it would push keys out.
func TestFaultFillRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		redis []string
		want  string
	}{
		{"no maxmemory", nil, "the shard has no maxmemory: filling it would get it OOM-killed, not refused"},
		{"allkeys-lru", []string{"--maxmemory", "20mb", "--maxmemory-policy", "allkeys-lru"}, "the shard's maxmemory-policy is allkeys-lru, not noeviction"},
		// CONFIG renamed away, as managed Redis services do: INFO says.
		{"allkeys-lru without CONFIG", []string{"--maxmemory", "20mb", "--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", ""}, "the shard's maxmemory-policy is allkeys-lru, not noeviction"},
		{"no maxmemory without CONFIG", []string{"--rename-command", "CONFIG", ""}, "the shard has no maxmemory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := testenv.FreePort(t)
			addr := "127.0.0.1:" + strconv.Itoa(port)
			faultRedis(t, nil, "127.0.0.1", port, addr, tc.redis...)
			c := redisClient(t, &redis.Options{Addr: addr})
			tl := emptyTermLog(t)
			run := startFill("--port", strconv.Itoa(port), "--duration", "5s", "--termination-log", tl)
			if code := run.wait(t); code != exitFailure {
				t.Fatalf("exit %d, want %d\nstderr: %s", code, exitFailure, run.errb.String())
			}
			errs := run.errb.String()
			if !strings.Contains(errs, "sluice-bench: fault fill: "+tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Fatalf("stderr %q, want one line with %q", errs, tc.want)
			}
			if out := run.out.String(); out != "" {
				t.Fatalf("stdout %q: nothing was injected", out)
			}
			if n, err := c.DBSize(context.Background()).Result(); err != nil || n != 0 {
				t.Fatalf("%d keys written (%v)", n, err)
			}
			checkTermLog(t, tl, `^fault fill: `+strings.ReplaceAll(tc.want, "(", `\(`))
		})
	}
}

func TestFaultFillWithoutConfigCommand(t *testing.T) {
	port := testenv.FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	faultRedis(t, nil, "127.0.0.1", port, addr,
		"--maxmemory", "20mb", "--maxmemory-policy", "noeviction", "--rename-command", "CONFIG", "")
	c := redisClient(t, &redis.Options{Addr: addr})
	run := startFill("--port", strconv.Itoa(port), "--duration", "1s", "--termination-log", "")
	if code := run.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, run.errb.String())
	}
	if inj := run.out.line("injected"); inj == nil || inj["full"] != true || number(t, inj, "maxmemory") != fillMaxmemory {
		t.Fatalf("injected line %v, want full with maxmemory from INFO", inj)
	}
	if n := fillKeys(t, c); n != 0 {
		t.Fatalf("%d filler keys remain", n)
	}
}

func TestFaultFillOverTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSignedCert(t, dir)
	port := testenv.FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	faultRedis(t, nil, "127.0.0.1", 0, addr,
		"--tls-port", strconv.Itoa(port), "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert,
		"--tls-auth-clients", "no", "--maxmemory", "20mb", "--maxmemory-policy", "noeviction", "--requirepass", "s3cret")
	t.Setenv("REDIS_PASSWORD", "s3cret")
	c := redisClient(t, &redis.Options{Addr: addr, Password: "s3cret", TLSConfig: &tls.Config{InsecureSkipVerify: true}})
	run := startFill("--port", strconv.Itoa(port), "--tls", "--duration", "1s", "--termination-log", "")
	if code := run.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, run.errb.String())
	}
	if inj := run.out.line("injected"); inj == nil || inj["full"] != true {
		t.Fatalf("injected line %v, want full", inj)
	}
	if n := fillKeys(t, c); n != 0 {
		t.Fatalf("%d filler keys remain", n)
	}
	// Without --tls the same shard cannot be reached: the flag matters.
	run = startFill("--port", strconv.Itoa(port), "--duration", "1s", "--termination-log", "")
	if code := run.wait(t); code != exitFailure {
		t.Fatalf("plain connection to a TLS shard: exit %d, want %d", code, exitFailure)
	}
}

// selfSignedCert writes a certificate and key for 127.0.0.1 to dir.
func selfSignedCert(t *testing.T, dir string) (certPath, keyPath string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redis-shard"},
		DNSNames: []string{"redis-shard"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}
