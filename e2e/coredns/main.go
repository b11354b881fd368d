// Command coredns is CoreDNS v1.14.5 with only the plugins the local
// cluster's DNS needs, so its build skips the cloud SDKs the full plugin set
// pulls in. The order of Directives is CoreDNS's own (plugin.cfg).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func init() {
	dnsserver.Directives = []string{
		"reload", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes", "loop",
	}
}

func main() { coremain.Run() }
