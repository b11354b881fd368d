package fault

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The faults talk netlink to nf_tables themselves: the image they run from
// is a static binary on an empty base, with no nft or iptables.

// ifname is an interface name as nf_tables compares it: IFNAMSIZ bytes,
// zero padded.
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// tcpPortNotLo matches tcp packets whose port (source when srcPort, else
// destination) is port and whose interface (ifKey: the input or output
// interface name) is not lo. Loopback stays untouched so that the pod's own
// exec probes (redis-cli ping) keep answering and the kubelet does not
// restart the pod in the middle of the fault.
func tcpPortNotLo(ifKey expr.MetaKey, srcPort bool, port uint16) []expr.Any {
	offset := uint32(2) // destination port in the tcp header
	if srcPort {
		offset = 0
	}
	return []expr.Any{
		&expr.Meta{Key: ifKey, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ifname("lo")},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: offset, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	}
}

// replaceTable creates table with what build adds to it, in one
// transaction that first removes a table of the same name: one left by an
// earlier run that was killed before it could undo.
func replaceTable(table *nftables.Table, build func(c *nftables.Conn, t *nftables.Table)) error {
	c, err := nftables.New()
	if err != nil {
		return nftError("open netlink", table, err)
	}
	c.AddTable(table) // so that the delete finds a table whether or not one was left
	c.DelTable(table)
	t := c.AddTable(table)
	build(c, t)
	if err := c.Flush(); err != nil {
		return nftError("create", table, err)
	}
	return nil
}

// deleteTable removes table; a table already gone is not an error.
func deleteTable(table *nftables.Table) error {
	c, err := nftables.New()
	if err != nil {
		return nftError("open netlink", table, err)
	}
	c.AddTable(table)
	c.DelTable(table)
	if err := c.Flush(); err != nil {
		return nftError("delete", table, err)
	}
	return nil
}

func nftError(op string, table *nftables.Table, err error) error {
	hint := ""
	if errors.Is(err, syscall.EPERM) {
		hint = " (the container needs CAP_NET_ADMIN in the pod's network namespace)"
	}
	return fmt.Errorf("nftables: %s table %s: %w%s", op, tableName(table), err, hint)
}

// tableName is the table as nft lists it ("inet sluice_fault_partition_6379").
func tableName(t *nftables.Table) string {
	family := map[nftables.TableFamily]string{
		nftables.TableFamilyINet: "inet", nftables.TableFamilyIPv4: "ip", nftables.TableFamilyIPv6: "ip6",
	}[t.Family]
	return family + " " + t.Name
}
