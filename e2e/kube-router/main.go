// Command kube-router is kube-router v1.6.1 in firewall-only mode: its
// NetworkPolicyController (iptables + ipset), as `kube-router
// --run-firewall=true --run-router=false --run-service-proxy=false` runs it,
// without the routing and service-proxy controllers, whose BGP dependency
// (gobgp v3.14.0) the Go module proxy does not serve. Flags are kube-router's
// own; --cleanup-config removes exactly the chains and ipsets the controller
// creates. /healthz is served on --healthz-address (loopback) and answers 200
// once the controller has begun its first full sync (it reports at the start
// of each), and while its syncs keep reporting in.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cloudnativelabs/kube-router/pkg/controllers/netpol"
	"github.com/cloudnativelabs/kube-router/pkg/healthcheck"
	"github.com/cloudnativelabs/kube-router/pkg/options"
	"github.com/spf13/pflag"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "kube-router: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	klog.InitFlags(nil)
	config := options.NewKubeRouterConfig()
	config.AddFlags(pflag.CommandLine)
	healthz := pflag.String("healthz-address", "127.0.0.1:20244", "address of /healthz (200 once policy syncs run)")
	pflag.Parse()
	if err := flag.Set("logtostderr", "true"); err != nil {
		return err
	}
	if err := flag.Set("v", config.VLevel); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root to run iptables and ipset")
	}
	if config.CleanupConfig {
		(&netpol.NetworkPolicyController{}).Cleanup()
		return nil
	}
	if !config.RunFirewall || config.RunRouter || config.RunServiceProxy {
		return errors.New("this build runs the firewall only: --run-firewall=true --run-router=false --run-service-proxy=false")
	}
	if config.Kubeconfig == "" {
		return errors.New("--kubeconfig is required (a host process, not a pod)")
	}
	restConfig, err := clientcmd.BuildConfigFromFlags(config.Master, config.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}

	stopCh := make(chan struct{})
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	nsInformer := factory.Core().V1().Namespaces().Informer()
	npInformer := factory.Networking().V1().NetworkPolicies().Informer()
	factory.Start(stopCh)
	synced := make(chan struct{})
	go func() { factory.WaitForCacheSync(stopCh); close(synced) }()
	select {
	case <-synced:
	case <-time.After(config.CacheSyncTimeout):
		return fmt.Errorf("informer caches not synced after %s", config.CacheSyncTimeout)
	}

	var ipsetMutex sync.Mutex
	npc, err := netpol.NewNetworkPolicyController(client, config, podInformer, npInformer, nsInformer, &ipsetMutex)
	if err != nil {
		return fmt.Errorf("network policy controller: %w", err)
	}
	podInformer.AddEventHandler(npc.PodEventHandler)
	nsInformer.AddEventHandler(npc.NamespaceEventHandler)
	npInformer.AddEventHandler(npc.NetworkPolicyEventHandler)

	// The controller reports each finished full sync on this channel (and
	// blocks when nobody reads it): the last report time is the health.
	healthChan := make(chan *healthcheck.ControllerHeartbeat, 10)
	var lastSync atomic.Int64
	go func() {
		for beat := range healthChan {
			lastSync.Store(beat.LastHeartBeat.UnixNano())
		}
	}()
	srv := &http.Server{Addr: *healthz, ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(
		func(w http.ResponseWriter, _ *http.Request) {
			last := lastSync.Load()
			if last == 0 || time.Since(time.Unix(0, last)) > 2*config.IPTablesSyncPeriod+time.Minute {
				http.Error(w, "no recent full policy sync", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "OK")
		})}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.Errorf("healthz: %v", err)
		}
	}()

	var wg sync.WaitGroup
	wg.Add(1)
	go npc.Run(healthChan, stopCh, &wg)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	klog.Info("shutting down the network policy controller")
	close(stopCh)
	wg.Wait()
	_ = srv.Close()
	return nil
}
