package testutil

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"testing"
)

// StartSentinel starts a Redis Sentinel (redis-server --sentinel) on a free
// port that monitors master under masterName with quorum 1 and short
// timeouts, so failover tests finish in seconds. Its URL field holds the
// Sentinel store URI form: redis://127.0.0.1:port?master=<masterName>.
func StartSentinel(t testing.TB, master *Redis, masterName string) *Redis {
	t.Helper()
	return startSentinel(t, master, masterName, "")
}

// StartSentinelAuth is StartSentinel with the Sentinel itself requiring
// password (requirepass); URL carries it as sentinel_password.
func StartSentinelAuth(t testing.TB, master *Redis, masterName, password string) *Redis {
	t.Helper()
	s := startSentinel(t, master, masterName, "requirepass "+password+"\n")
	s.URL += "&sentinel_password=" + url.QueryEscape(password)
	return s
}

func startSentinel(t testing.TB, master *Redis, masterName, extraConf string) *Redis {
	t.Helper()
	s := &Redis{
		bin: RequireBinary(t, "redis-server", "the Debian package redis-server (make deps-apt)"),
		Dir: t.TempDir(),
	}
	s.argv = func() []string {
		// Sentinel rewrites its config file, so it is written afresh into
		// the sentinel's own directory before every start.
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\nlogfile \"\"\n"+
			"sentinel monitor %s 127.0.0.1 %d 1\n"+
			"sentinel down-after-milliseconds %[3]s 1000\n"+
			"sentinel failover-timeout %[3]s 5000\n%[5]s",
			s.Port, s.Dir, masterName, master.Port, extraConf)
		path, err := writeFile(s.Dir, "sentinel.conf", conf)
		if err != nil {
			t.Fatalf("writing sentinel config: %v", err)
		}
		return []string{path, "--sentinel"}
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		s.Port = FreePort(t)
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("starting redis sentinel: %v", err)
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	s.URL = "redis://" + s.Addr + "?master=" + masterName
	t.Cleanup(s.Stop)
	return s
}
