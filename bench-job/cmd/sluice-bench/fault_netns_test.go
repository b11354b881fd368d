package main

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/redis/go-redis/v9"

	"sluice.dev/bench/internal/fault"
	"sluice.dev/bench/internal/testenv"
)

// The partition and delay faults run as a shard's pod runs them: inside a
// network namespace of their own (the test's, joined to the test by a
// veth pair), next to a redis-server, while the test is the outside world.
// Every address involved is inside 10.213.0.0/16 on that pair, or loopback.

const nsRedisPort = 6379

// shardNetns is a namespace with a redis-server on nsRedisPort and the
// sluice-bench binary to run faults in it.
func shardNetns(t *testing.T) (ns *testNetns, bin, addr string) {
	t.Helper()
	ns = newTestNetns(t)
	bin = buildBench(t)
	addr = net.JoinHostPort(ns.nsIP, strconv.Itoa(nsRedisPort))
	faultRedis(t, []string{"ip", "netns", "exec", ns.name}, "0.0.0.0", nsRedisPort, addr)
	return ns, bin, addr
}

// ping sends a RESP PING on c and waits up to timeout for +PONG.
func ping(c net.Conn, r *bufio.Reader, timeout time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return errors.New("answer " + strconv.Quote(line))
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// loopbackPing asks the namespace's Redis over lo, as an exec probe does.
func loopbackPing(t *testing.T, ns *testNetns) string {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		testenv.Unavailable(t, "redis-cli not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "ip", "netns", "exec", ns.name, cli, "-h", "127.0.0.1", "-p", strconv.Itoa(nsRedisPort), "ping").CombinedOutput()
	return strings.TrimSpace(string(out))
}

func TestFaultPartitionCutsThePortOffThenRestoresIt(t *testing.T) {
	ns, bin, addr := shardNetns(t)
	table := fault.PartitionTable(nsRedisPort)
	// What a run killed before its undo leaves: replaced, not added to.
	nft := ns.nft(t)
	stale := nft.AddTable(&nftables.Table{Family: table.Family, Name: table.Name})
	nft.AddChain(&nftables.Chain{Name: "left-behind", Table: stale})
	if err := nft.Flush(); err != nil {
		t.Fatal(err)
	}
	// An established connection, to see it stall and then resume.
	pre, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer pre.Close()
	preR := bufio.NewReader(pre)
	if err := ping(pre, preR, 2*time.Second); err != nil {
		t.Fatal(err)
	}

	tl := emptyTermLog(t)
	f := startNetnsFault(t, ns, bin, "partition", "--port", strconv.Itoa(nsRedisPort), "--duration", "3s", "--termination-log", tl)
	inj := f.waitLine(t, "injected", 10*time.Second)
	if inj["table"] != "inet "+table.Name {
		t.Fatalf("injected line %v", inj)
	}
	chains, err := ns.nft(t).ListChainsOfTableFamily(table.Family)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range chains {
		if c.Table.Name == table.Name {
			names = append(names, c.Name)
		}
	}
	sort.Strings(names)
	if !slices.Equal(names, []string{"input", "output"}) {
		t.Fatalf("chains %v, want the stale table replaced by input and output", names)
	}

	// From outside: new connections and established ones meet silence.
	if c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("connected to the partitioned port")
	} else if !isTimeout(err) {
		t.Fatalf("connect during the partition: %v, want a timeout (dropped, not refused)", err)
	}
	if err := ping(pre, preR, 500*time.Millisecond); !isTimeout(err) {
		t.Fatalf("PING on an established connection during the partition: %v, want a timeout", err)
	}
	// From inside, over lo, as the pod's exec probes ask: still answered.
	if got := loopbackPing(t, ns); got != "PONG" {
		t.Fatalf("redis-cli ping over lo during the partition: %q", got)
	}

	if code := f.wait(t, 15*time.Second); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, f.errb.String())
	}
	if undone := f.out.line("undone"); undone == nil || undone["stoppedBy"] != "duration" {
		t.Fatalf("undone line %v\nstdout: %s", undone, f.out.String())
	}
	if left := ns.tables(t, "sluice_fault"); len(left) != 0 {
		t.Fatalf("tables left: %v", left)
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("connect after the partition: %v", err)
	}
	if err := ping(c, bufio.NewReader(c), 2*time.Second); err != nil {
		t.Fatalf("PING after the partition: %v", err)
	}
	c.Close()
	// The PING sent during the partition is retransmitted and answered.
	_ = pre.SetReadDeadline(time.Now().Add(20 * time.Second))
	if line, err := preR.ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("the established connection after the partition: %q, %v", line, err)
	}
	checkTermLog(t, tl, `^partitioned tcp port 6379 from every interface but lo for \d+(\.\d)?s, then removed the nftables table\n$`)
}

func TestFaultPartitionUndoesOnSIGTERM(t *testing.T) {
	ns, bin, addr := shardNetns(t)
	f := startNetnsFault(t, ns, bin, "partition", "--port", strconv.Itoa(nsRedisPort), "--duration", "10m")
	f.waitLine(t, "injected", 10*time.Second)
	if got := ns.tables(t, "sluice_fault"); len(got) != 1 {
		t.Fatalf("tables %v during the partition", got)
	}
	if err := f.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := f.wait(t, 10*time.Second); code != exitOK {
		t.Fatalf("exit %d after SIGTERM\nstderr: %s", code, f.errb.String())
	}
	if undone := f.out.line("undone"); undone == nil || undone["stoppedBy"] != "SIGTERM" {
		t.Fatalf("undone line %v", undone)
	}
	if left := ns.tables(t, "sluice_fault"); len(left) != 0 {
		t.Fatalf("tables left after SIGTERM: %v", left)
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("connect after SIGTERM: %v", err)
	}
	c.Close()
}

// pingTimes times n PINGs on c; every one must be answered.
func pingTimes(t *testing.T, c *redis.Client, n int) []time.Duration {
	t.Helper()
	var ds []time.Duration
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		err := c.Ping(ctx).Err()
		cancel()
		if err != nil {
			t.Fatalf("PING %d: %v", i, err)
		}
		ds = append(ds, time.Since(start))
	}
	return ds
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func TestFaultDelaySlowsThePortThenRestoresIt(t *testing.T) {
	const delay, jitter = 100 * time.Millisecond, 20 * time.Millisecond
	ns, bin, addr := shardNetns(t)
	// A client connected before the fault, as sluice-server's pool is:
	// the fault disconnects it, and its reconnection goes through the proxy.
	c := redisClient(t, &redis.Options{Addr: addr, PoolSize: 1, MaxRetries: 3, DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second})
	if before := median(pingTimes(t, c, 5)); before >= delay/2 {
		t.Fatalf("PING takes %v before the delay: the namespace is too slow to measure", before)
	}

	tl := emptyTermLog(t)
	f := startNetnsFault(t, ns, bin, "delay", "--port", strconv.Itoa(nsRedisPort), "--delay", delay.String(), "--jitter", jitter.String(),
		"--duration", "4s", "--termination-log", tl)
	inj := f.waitLine(t, "injected", 10*time.Second)
	if number(t, inj, "clientsKilled") < 1 || number(t, inj, "proxyPort") != nsRedisPort+10000 {
		t.Fatalf("injected line %v, want the test's connection killed and proxy port %d", inj, nsRedisPort+10000)
	}
	if got := ns.tables(t, "sluice_fault"); !slices.Equal(got, []string{fault.DelayTable(nsRedisPort).Name}) {
		t.Fatalf("tables %v during the delay", got)
	}
	during := pingTimes(t, c, 5)
	t.Logf("PING during the delay: %v", during)
	for i, d := range during {
		if d < delay-jitter {
			t.Fatalf("PING %d took %v during a %v ± %v delay", i, d, delay, jitter)
		}
	}

	if code := f.wait(t, 20*time.Second); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, f.errb.String())
	}
	undone := f.out.line("undone")
	if undone == nil || number(t, undone, "connections") < 1 || undone["warning"] != nil {
		t.Fatalf("undone line %v", undone)
	}
	if left := ns.tables(t, "sluice_fault"); len(left) != 0 {
		t.Fatalf("tables left: %v", left)
	}
	// Reconnected directly: the first PING may still find the connection
	// the end of the fault closed.
	if after := median(pingTimes(t, c, 5)[1:]); after >= delay/2 {
		t.Fatalf("PING takes %v after the delay", after)
	}
	checkTermLog(t, tl, `^delayed tcp port 6379 by 100ms ± 20ms each way through proxy port 16379 for \d+(\.\d)?s \(\d+ connections relayed, 0 refused over the limit\), then removed the redirect\n$`)
}
