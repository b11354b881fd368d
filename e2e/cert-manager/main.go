// Command cert-manager runs the cert-manager controllers the operator relies
// on (github.com/cert-manager/cert-manager, the release pinned in go.mod)
// as a host process against a kubeconfig: Certificates (trigger, key
// manager, request manager, issuing, readiness, revisions),
// CertificateRequests approved and signed by the SelfSigned and CA issuers,
// Issuers and ClusterIssuers. Upstream's own binary (module cmd/controller) is
// not served by the Go proxy; this is the same library, wired as its
// controller app does, with only these controllers imported so the build
// stays small (no ACME, Vault, Venafi, Gateway API or webhook).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// Each import registers its controller (controllerpkg.Known) or issuer type.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	namespace := flag.String("namespace", "", "namespace to watch (empty: all, ClusterIssuers included)")
	clusterNS := flag.String("cluster-resource-namespace", "cert-manager", "namespace of the Secrets ClusterIssuers read")
	workers := flag.Int("workers", 2, "workers per controller")
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	flag.Var(&verbosity{klogFlags}, "v", "log verbosity (cert-manager: 2 info, 4 debug)")
	flag.Parse()

	logf.InitLogs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, *kubeconfig, *namespace, *clusterNS, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager:", err)
		os.Exit(1)
	}
}

// verbosity forwards -v to klog, whose flags live in their own set.
type verbosity struct{ fs *flag.FlagSet }

func (v *verbosity) String() string {
	if v.fs == nil {
		return "0"
	}
	return v.fs.Lookup("v").Value.String()
}
func (v *verbosity) Set(s string) error { return v.fs.Set("v", s) }

func run(ctx context.Context, kubeconfig, namespace, clusterNS string, workers int) error {
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig: kubeconfig,
		Namespace:  namespace,
		// Upstream's defaults (internal/apis/config/controller/v1alpha1).
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: clusterNS},
		CertificateOptions: controllerpkg.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	names := make([]string, 0, len(controllerpkg.Known()))
	for n := range controllerpkg.Known() {
		// As upstream: ClusterIssuers only when every namespace is watched.
		if namespace == "" || n != clusterissuers.ControllerName {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	// Constructors register their informers, so all are built before the
	// factories start; then every controller runs until the context ends.
	controllers := make([]controllerpkg.Interface, 0, len(names))
	for _, n := range names {
		c, err := controllerpkg.Known()[n](factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", n, err)
		}
		controllers = append(controllers, c)
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(controllers))
	for i, c := range controllers {
		wg.Add(1)
		go func(name string, c controllerpkg.Interface) {
			defer wg.Done()
			if err := c.Run(workers, ctx); err != nil {
				errs <- fmt.Errorf("controller %s: %w", name, err)
			}
		}(names[i], c)
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	klog.InfoS("cert-manager controllers started", "controllers", names, "namespace", namespace)
	wg.Wait()
	close(errs)
	return <-errs
}
