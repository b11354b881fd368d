package fault

import (
	"context"
	"fmt"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// Partition cuts the shard's port off from everything outside the pod: tcp
// packets to it arriving on any interface but lo, and from it leaving on
// any interface but lo, are dropped. Dropped, not rejected: a partition
// looks like silence, so clients wait for their timeouts, and established
// connections resume (TCP retransmits) once the table is gone.
type Partition struct {
	Port uint16
}

// PartitionTable is the nftables table of a partition of port (family inet:
// IPv4 and IPv6 alike).
func PartitionTable(port uint16) *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyINet, Name: fmt.Sprintf("sluice_fault_partition_%d", port)}
}

// PartitionDetails is what the injected line reports.
type PartitionDetails struct {
	Port  uint16 `json:"port"`
	Table string `json:"table"`
}

func (p *Partition) Kind() string { return "partition" }

func (p *Partition) Inject(ctx context.Context) (any, error) {
	table := PartitionTable(p.Port)
	err := replaceTable(table, func(c *nftables.Conn, t *nftables.Table) {
		accept := nftables.ChainPolicyAccept
		in := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
		c.AddRule(&nftables.Rule{Table: t, Chain: in,
			Exprs: append(tcpPortNotLo(expr.MetaKeyIIFNAME, false, p.Port), &expr.Verdict{Kind: expr.VerdictDrop})})
		out := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
		c.AddRule(&nftables.Rule{Table: t, Chain: out,
			Exprs: append(tcpPortNotLo(expr.MetaKeyOIFNAME, true, p.Port), &expr.Verdict{Kind: expr.VerdictDrop})})
	})
	if err != nil {
		return nil, err
	}
	return PartitionDetails{Port: p.Port, Table: tableName(table)}, nil
}

func (p *Partition) Hold(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func (p *Partition) Undo(ctx context.Context) (any, error) {
	return PartitionDetails{Port: p.Port, Table: tableName(PartitionTable(p.Port))}, deleteTable(PartitionTable(p.Port))
}

func (p *Partition) Summary(held time.Duration, stoppedBy string) string {
	return fmt.Sprintf("partitioned tcp port %d from every interface but lo for %s%s, then removed the nftables table",
		p.Port, roundHeld(held), stoppedSuffix(stoppedBy))
}

// roundHeld prints a held time as people read it: 20s, 7.2s, 850ms.
func roundHeld(d time.Duration) string {
	if d >= 10*time.Second {
		return d.Round(time.Second).String()
	}
	if d >= time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// stoppedSuffix notes a fault that a signal ended before its duration.
func stoppedSuffix(stoppedBy string) string {
	if stoppedBy == "duration" {
		return ""
	}
	return " (stopped by " + stoppedBy + ")"
}
