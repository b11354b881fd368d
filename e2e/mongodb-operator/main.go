// Command mongodb-operator runs the MongoDB community operator's replica-set
// controller (github.com/mongodb/mongodb-kubernetes-operator, the release
// pinned in go.mod) against the local control plane: the same controller as
// the upstream manager, with its metrics bound to a loopback port given by
// flag instead of :8080, which the local components already use.
package main

import (
	"flag"
	"os"

	mdbv1 "github.com/mongodb/mongodb-kubernetes-operator/api/v1"
	"github.com/mongodb/mongodb-kubernetes-operator/controllers"
	"github.com/mongodb/mongodb-kubernetes-operator/controllers/construct"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"
)

func main() {
	metrics := flag.String("metrics-bind-address", "127.0.0.1:10292", "metrics address (0 disables)")
	namespace := flag.String("namespace", os.Getenv("WATCH_NAMESPACE"), `namespace to watch, "*" or empty for all`)
	flag.Parse()

	logger, err := zap.NewDevelopment()
	if err != nil {
		panic(err)
	}
	zap.ReplaceGlobals(logger)
	log := logger.Sugar()
	// The controller reads these when it builds a replica set's StatefulSet.
	for _, env := range []string{construct.AgentImageEnv, construct.VersionUpgradeHookImageEnv, construct.ReadinessProbeImageEnv} {
		if os.Getenv(env) == "" {
			log.Fatalf("environment variable %s is required", env)
		}
	}
	if *namespace == "*" {
		*namespace = ""
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(mdbv1.AddToScheme(scheme))

	cfg, err := config.GetConfig()
	if err != nil {
		log.Fatalf("kubeconfig: %v", err)
	}
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 scheme,
		Namespace:              *namespace,
		MetricsBindAddress:     *metrics,
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		log.Fatalf("manager: %v", err)
	}
	if err := controllers.NewReconciler(mgr).SetupWithManager(mgr); err != nil {
		log.Fatalf("controller: %v", err)
	}
	log.Infof("watching namespace %q (empty: all)", *namespace)
	if err := mgr.Start(signals.SetupSignalHandler()); err != nil {
		log.Fatalf("manager stopped: %v", err)
	}
}
