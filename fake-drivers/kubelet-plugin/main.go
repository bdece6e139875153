// fake-kubelet-plugin: the node half of the fake vendor driver on a cluster with real kubelets (kind).
//
// The Python fake-node-driver publishes the ResourceSlices (one process for all nodes) and the reference
// controller attaches fabric devices; this plugin only lets the kubelet start pods that hold a claim of the
// driver: it registers the driver on its node and answers NodePrepareResources with CDI devices. It never
// publishes slices.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

type plugin struct {
	driver string
	cdiDir string
}

func (p *plugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	results := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		results[claim.UID] = p.prepare(claim)
		klog.FromContext(ctx).Info("prepared", "claim", klog.KObj(claim), "err", results[claim.UID].Err)
	}
	return results, nil
}

func (p *plugin) prepare(claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	if claim.Status.Allocation == nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)}
	}
	var mine []allocated
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver == p.driver {
			mine = append(mine, allocated{Request: r.Request, Pool: r.Pool, Device: r.Device})
		}
	}
	spec, ids := buildSpec(p.driver, claim.UID, mine)
	if err := writeSpec(p.cdiDir, p.driver, claim.UID, spec); err != nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("write CDI spec: %w", err)}
	}
	result := kubeletplugin.PrepareResult{}
	for i, d := range mine {
		result.Devices = append(result.Devices, kubeletplugin.Device{
			Requests: []string{d.Request}, PoolName: d.Pool, DeviceName: d.Device, CDIDeviceIDs: []string{ids[i]},
		})
	}
	return result
}

func (p *plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	results := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		results[claim.UID] = removeSpec(p.cdiDir, p.driver, claim.UID)
	}
	return results, nil
}

// WatchHealthStatus: fake devices have no health to report (the health service is also turned off in main).
func (p *plugin) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

func (p *plugin) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
}

func main() {
	driver := flag.String("driver", "gpu.fabric.example.com", "DRA driver name the plugin registers for")
	node := flag.String("node-name", os.Getenv("NODE_NAME"), "name of this node (default $NODE_NAME)")
	cdiDir := flag.String("cdi-dir", "/var/run/cdi", "where containerd looks for CDI specs")
	klog.InitFlags(nil)
	flag.Parse()
	if *node == "" {
		klog.Fatal("--node-name or NODE_NAME is required")
	}
	config, err := rest.InClusterConfig()
	if err != nil {
		klog.Fatalf("in-cluster config: %v", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		klog.Fatalf("client: %v", err)
	}
	// The helper listens in <plugins>/<driver>/ but does not create it (the kubelet creates only plugins/).
	dataDir := filepath.Join(kubeletplugin.KubeletPluginsDir, *driver)
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		klog.Fatalf("create %s: %v", dataDir, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	helper, err := kubeletplugin.Start(ctx, &plugin{driver: *driver, cdiDir: *cdiDir},
		kubeletplugin.DriverName(*driver), kubeletplugin.NodeName(*node), kubeletplugin.KubeClient(client),
		kubeletplugin.HealthService(false))
	if err != nil {
		klog.Fatalf("start kubelet plugin: %v", err)
	}
	klog.InfoS("kubelet plugin registered", "driver", *driver, "node", *node)
	<-ctx.Done()
	helper.Stop()
}
