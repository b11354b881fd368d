package fault

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/redis/go-redis/v9"
)

// Proxy bounds of a delay: enough for a shard's clients, small enough
// that the ephemeral container cannot take the pod's memory.
const (
	DelayMaxConns = 1024
	DelayMaxHeld  = 8 << 20 // bytes per direction of a connection
)

// Delay slows the shard's port down: connections to it from outside the
// pod are redirected (nftables, nat prerouting) to a proxy in the pod that
// holds every chunk, each way, for Delay ± Jitter before passing it to
// 127.0.0.1:Port. The kernels this runs on have no sch_netem, hence the
// proxy. A redirect only catches new connections (conntrack keeps the
// others as they were), so the shard's clients are disconnected once the
// redirect is in place, and again once it is gone, to reconnect directly.
type Delay struct {
	Port, ProxyPort uint16
	Delay, Jitter   time.Duration
	Redis           Redis

	proxy  *Proxy
	rc     *redis.Client
	killed int64
}

// DelayTable is the nftables table of a delay on port. Family ip: the
// redirect catches IPv4 clients, which is what pod networks give a
// Service's clients.
func DelayTable(port uint16) *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyIPv4, Name: fmt.Sprintf("sluice_fault_delay_%d", port)}
}

// DelayDetails is what the injected line reports.
type DelayDetails struct {
	Port          uint16 `json:"port"`
	ProxyPort     uint16 `json:"proxyPort"`
	Delay         string `json:"delay"`
	Jitter        string `json:"jitter"`
	Table         string `json:"table"`
	ClientsKilled int64  `json:"clientsKilled"`
}

// DelayUndone is what the undone line reports.
type DelayUndone struct {
	Port          uint16 `json:"port"`
	ClientsKilled int64  `json:"clientsKilled"`
	ProxyStats
	Warning string `json:"warning,omitempty"`
}

func (d *Delay) Kind() string { return "delay" }

func (d *Delay) Inject(ctx context.Context) (_ any, err error) {
	p, err := ListenProxy(ProxyConfig{
		Listen:   ":" + strconv.Itoa(int(d.ProxyPort)),
		Upstream: "127.0.0.1:" + strconv.Itoa(int(d.Port)),
		Delay:    d.Delay, Jitter: d.Jitter,
		MaxConns: DelayMaxConns, MaxHeld: DelayMaxHeld,
	})
	if err != nil {
		return nil, fmt.Errorf("proxy port %d: %w", d.ProxyPort, err)
	}
	rc := d.Redis.client()
	table := DelayTable(d.Port)
	tableMade := false
	defer func() {
		if err == nil {
			return
		}
		if tableMade {
			if derr := deleteTable(table); derr != nil {
				err = errors.Join(err, derr)
			}
		}
		_ = rc.Close()
		p.Shutdown(0)
	}()
	// The connections the proxy makes come from lo and pass untouched.
	err = replaceTable(table, func(c *nftables.Conn, t *nftables.Table) {
		accept := nftables.ChainPolicyAccept
		ch := c.AddChain(&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &accept})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(tcpPortNotLo(expr.MetaKeyIIFNAME, false, d.Port),
			&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(d.ProxyPort)},
			&expr.Redir{RegisterProtoMin: 1},
		)})
	})
	if err != nil {
		return nil, err
	}
	tableMade = true
	n, err := killClients(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("disconnect the shard's clients so they reconnect through the proxy: %w", err)
	}
	d.proxy, d.rc = p, rc
	return DelayDetails{Port: d.Port, ProxyPort: d.ProxyPort, Delay: d.Delay.String(), Jitter: d.Jitter.String(),
		Table: tableName(table), ClientsKilled: n}, nil
}

func (d *Delay) Hold(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func (d *Delay) Undo(ctx context.Context) (any, error) {
	err := deleteTable(DelayTable(d.Port))
	out := DelayUndone{Port: d.Port}
	// Closing the proxied connections is enough for clients to come back
	// directly; CLIENT KILL makes it prompt and also reaches connections a
	// slow client has not noticed are dead. Its failure is only reported.
	if n, kerr := killClients(ctx, d.rc); kerr != nil {
		out.Warning = kerr.Error()
	} else {
		out.ClientsKilled = n
		d.killed = n
	}
	_ = d.rc.Close()
	// Let the held bytes reach their connections (each way) before the
	// proxy closes what is left.
	d.proxy.Shutdown(min(2*(d.Delay+d.Jitter)+time.Second, 10*time.Second))
	out.ProxyStats = d.proxy.Stats()
	return out, err
}

func (d *Delay) Summary(held time.Duration, stoppedBy string) string {
	s := d.proxy.Stats()
	return fmt.Sprintf("delayed tcp port %d by %v ± %v each way through proxy port %d for %s%s (%d connections relayed, %d refused over the limit), then removed the redirect",
		d.Port, d.Delay, d.Jitter, d.ProxyPort, roundHeld(held), stoppedSuffix(stoppedBy), s.Accepted-s.Refused, s.Refused)
}
