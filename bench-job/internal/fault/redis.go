package fault

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is how a fault reaches the shard it runs beside: over loopback,
// inside the pod.
type Redis struct {
	Port uint16
	// Password is the shard's requirepass (REDIS_PASSWORD), "" for none.
	Password string
	// TLS: the shard serves TLS only.
	TLS bool
}

// client connects to the shard at 127.0.0.1.
func (r Redis) client() *redis.Client {
	opts := &redis.Options{
		Addr:     "127.0.0.1:" + strconv.Itoa(int(r.Port)),
		Password: r.Password,
		// RESP2 and no CLIENT SETINFO, as sluice-server connects: nothing
		// on connect that a restricted shard could refuse.
		Protocol:        2,
		DisableIdentity: true,
		DialTimeout:     5 * time.Second,
		ReadTimeout:     10 * time.Second,
		WriteTimeout:    10 * time.Second,
		PoolSize:        2,
	}
	if r.TLS {
		// Not verifying is safe here: the connection goes to 127.0.0.1
		// inside the pod's own network namespace and never leaves it, so
		// only something already in the pod could answer in the shard's
		// place. Verifying would need the shard's CA mounted into the
		// ephemeral container, and its certificate names the Service, not
		// 127.0.0.1.
		opts.TLSConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	}
	return redis.NewClient(opts)
}

// killClients closes the shard's normal client connections (not this one,
// not replicas) and returns how many it closed, so that clients reconnect
// and their new connections go through whatever the fault put in place.
func killClients(ctx context.Context, c *redis.Client) (int64, error) {
	n, err := c.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Int64()
	if err != nil {
		return 0, fmt.Errorf("redis CLIENT KILL TYPE normal: %w", err)
	}
	return n, nil
}

// memoryInfo is the part of INFO memory a fill needs.
type memoryInfo struct {
	used, maxmemory int64
	policy          string
}

func readMemoryInfo(ctx context.Context, c *redis.Client) (memoryInfo, error) {
	text, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return memoryInfo{}, fmt.Errorf("redis INFO memory: %w", err)
	}
	var m memoryInfo
	seen := 0
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_memory":
			m.used, err = strconv.ParseInt(v, 10, 64)
			seen++
		case "maxmemory":
			m.maxmemory, err = strconv.ParseInt(v, 10, 64)
			seen++
		case "maxmemory_policy":
			m.policy = v
			seen++
		}
		if err != nil {
			return memoryInfo{}, fmt.Errorf("redis INFO memory: %s: %w", k, err)
		}
	}
	if seen != 3 {
		return memoryInfo{}, fmt.Errorf("redis INFO memory lacks used_memory, maxmemory or maxmemory_policy")
	}
	return m, nil
}

// memoryLimits reads maxmemory and maxmemory-policy with CONFIG GET, or
// from INFO memory where CONFIG is renamed away or not allowed (managed
// Redis services often do that).
func memoryLimits(ctx context.Context, c *redis.Client) (maxmemory int64, policy string, err error) {
	cfg, cerr := c.ConfigGet(ctx, "maxmemory*").Result()
	if cerr == nil {
		if v, ok := cfg["maxmemory"]; ok {
			if maxmemory, err = strconv.ParseInt(v, 10, 64); err == nil {
				if p, ok := cfg["maxmemory-policy"]; ok {
					return maxmemory, p, nil
				}
			}
		}
	}
	m, err := readMemoryInfo(ctx, c)
	if err != nil {
		if cerr != nil {
			return 0, "", fmt.Errorf("%w (and CONFIG GET: %v)", err, cerr)
		}
		return 0, "", err
	}
	return m.maxmemory, m.policy, nil
}
