// Command sluice-operator runs the SluiceJob controller (package
// controller) in a Kubernetes cluster: deploy/operator/ installs it with
// its CRD and RBAC.
package main

import (
	"flag"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sluicev1 "github.com/sluicehq/sluice/operator/api/v1alpha1"
	"github.com/sluicehq/sluice/operator/internal/controller"
)

func main() {
	var (
		metricsAddr, probeAddr string
		leaderElect            bool
		namespace              string
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "the operator's /metrics; 0: none")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "the operator's /healthz and /readyz")
	flag.BoolVar(&leaderElect, "leader-elect", true, "one active operator among its replicas (a Lease)")
	flag.StringVar(&namespace, "namespace", os.Getenv("WATCH_NAMESPACE"), "watch only this namespace ($WATCH_NAMESPACE); empty: all")
	flag.Parse()

	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctrl.SetLogger(logr.FromSlogHandler(logger.Handler()))

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		logger.Error("scheme", "err", err)
		os.Exit(1)
	}
	if err := sluicev1.AddToScheme(scheme); err != nil {
		logger.Error("scheme", "err", err)
		os.Exit(1)
	}
	opts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "sluice-operator.sluice.sluicehq.dev",
	}
	if namespace != "" {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), opts)
	if err != nil {
		logger.Error("start the manager", "err", err)
		os.Exit(1)
	}
	r := &controller.Reconciler{Client: mgr.GetClient(), Scheme: scheme,
		Recorder: mgr.GetEventRecorder("sluice-operator"), Logger: logger, APIReader: mgr.GetAPIReader()}
	if err := r.SetupWithManager(mgr); err != nil {
		logger.Error("set up the controller", "err", err)
		os.Exit(1)
	}
	if err := (&controller.SavepointReconciler{Jobs: r}).SetupWithManager(mgr); err != nil {
		logger.Error("set up the savepoint controller", "err", err)
		os.Exit(1)
	}
	_ = mgr.AddHealthzCheck("healthz", healthz.Ping)
	_ = mgr.AddReadyzCheck("readyz", healthz.Ping)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		logger.Error("the manager stopped", "err", err)
		os.Exit(1)
	}
}
