// Command local-provisioner gives the local cluster dynamic provisioning of
// node-local volumes, as kind's local-path and minikube's hostpath do: every
// claim of the StorageClass that names it gets a `local` PersistentVolume on a
// fresh directory under --root, pinned to the node the scheduler chose.
//
// It runs on the host (not in a pod) beside the other cluster components, so
// one process serves the real node and the simulated ones alike: the volume
// directory is made on this machine, which is where every node of the local
// cluster lives. The controller loop (claim and volume informers, retries,
// events, PV creation and reclaim) is sig-storage-lib-external-provisioner's.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig with the provisioner's credentials")
	root := flag.String("root", "", "directory that holds one directory per volume (absolute)")
	name := flag.String("name", DefaultName, "provisioner name the StorageClass refers to")
	flag.Parse()
	if err := run(*kubeconfig, *root, *name); err != nil {
		fmt.Fprintln(os.Stderr, "local-provisioner:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, root, name string) error {
	if kubeconfig == "" {
		return fmt.Errorf("--kubeconfig is required")
	}
	if !filepath.IsAbs(root) {
		return fmt.Errorf("--root must be an absolute path, got %q", root)
	}
	// 0700: only root on the host may walk into the volumes; pods see their
	// own directory through kubelet's bind mount, which does not cross this one.
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("volumes root: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	klog.InfoS("serving", "provisioner", name, "root", root)
	pc := controller.NewProvisionController(ctx, client, name, &localProvisioner{root: filepath.Clean(root)},
		// One process per cluster, started and stopped by the bring-up scripts:
		// a lease would only add RBAC and a start-up delay.
		controller.LeaderElection(false),
		// A volume whose directory cannot be made or removed is reported as
		// an event on the claim; give up after a few tries instead of forever.
		controller.FailedProvisionThreshold(5),
		controller.FailedDeleteThreshold(5),
	)
	pc.Run(ctx)
	klog.InfoS("stopped")
	return nil
}
