// Command cri-reset stops and removes every pod sandbox (and so every
// container) of one CRI runtime, through the CRI API itself, so that the
// runtime also tears down each pod's network (CNI DEL) and network namespace.
// The local cluster's teardown uses it on its own containerd socket only.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	endpoint := flag.String("endpoint", "", "CRI socket, e.g. unix:///run/sluice/containerd/containerd.sock")
	timeout := flag.Duration("timeout", 60*time.Second, "overall deadline")
	flag.Parse()
	if *endpoint == "" {
		fmt.Fprintln(os.Stderr, "cri-reset: --endpoint is required")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := reset(ctx, *endpoint); err != nil {
		fmt.Fprintln(os.Stderr, "cri-reset:", err)
		os.Exit(1)
	}
}

func reset(ctx context.Context, endpoint string) error {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtime.NewRuntimeServiceClient(conn)
	pods, err := rt.ListPodSandbox(ctx, &runtime.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var failed int
	for _, p := range pods.Items {
		// Stopping a sandbox kills its containers and releases its network.
		if _, err := rt.StopPodSandbox(ctx, &runtime.StopPodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			fmt.Fprintf(os.Stderr, "stop %s/%s: %v\n", p.Metadata.Namespace, p.Metadata.Name, err)
			failed++
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtime.RemovePodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			fmt.Fprintf(os.Stderr, "remove %s/%s: %v\n", p.Metadata.Namespace, p.Metadata.Name, err)
			failed++
		}
	}
	fmt.Printf("cri-reset: removed %d pod sandboxes\n", len(pods.Items)-failed)
	if failed > 0 {
		return fmt.Errorf("%d pod sandboxes not removed", failed)
	}
	return nil
}
