// fake-kubelet-plugin: the node half of the fake vendor driver on a cluster with real kubelets (kind), one per node
// (a DaemonSet).
//
// It registers the driver with its node's kubelet and publishes the node's ResourceSlice through the kubelet plugin
// helper: the node's local devices (the node driver's config) and the fabric devices the fabric manager reports
// attached to this node (the hot-plug; with --deny-list hidden while the fabric pool still offers them, as in
// keep-in-pool). It answers NodePrepareResources with CDI devices only for devices on this node: a local one, or a
// fabric device the fabric manager reports attached here (else the kubelet retries); NodeUnprepareResources removes
// the claim's CDI spec. The reference controller attaches fabric devices; this plugin never does.
//
// The --broken-* flags make it wrong on purpose, for the suite's selftests (tests/selftest/test_kubelet_breakage.py).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

// broken says which requirement of the kubelet path the plugin breaks on purpose (all false: correct).
type broken struct {
	noCDI                bool // NODE-1: prepared claims get no CDI device: the container starts without its device
	prepareEarly         bool // NODE-2: prepares a claim once allocated to this node, before binding and the attach
	unprepareAfterDetach bool // NODE-3: the CDI spec stays until the fabric has detached the device
	neverUnprepare       bool // NODE-3: the CDI spec is never removed
}

type plugin struct {
	driver, node, cdiDir string
	client               kubernetes.Interface
	fabric               *fabricClient
	local                []device
	policy               policy
	interval             time.Duration
	broken               broken
	published            atomic.Bool
	mu                   sync.Mutex
	identities           map[types.UID][]string // prepared claim -> uuids of its devices
}

func (p *plugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	results := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		results[claim.UID] = p.prepare(ctx, claim)
		klog.FromContext(ctx).Info("NodePrepareResources", "claim", klog.KObj(claim), "uid", claim.UID,
			"devices", results[claim.UID].Devices, "err", results[claim.UID].Err)
	}
	return results, nil
}

func (p *plugin) mine(claim *resourceapi.ResourceClaim) []allocated {
	var out []allocated
	if claim.Status.Allocation == nil {
		return nil
	}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver == p.driver {
			out = append(out, allocated{Request: r.Request, Pool: r.Pool, Device: r.Device})
		}
	}
	return out
}

func (p *plugin) prepare(ctx context.Context, claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	if claim.Status.Allocation == nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)}
	}
	mine := p.mine(claim)
	spec, ids := buildSpec(p.driver, claim.UID, mine)
	_, statErr := os.Stat(specPath(p.cdiDir, p.driver, claim.UID))
	if !(p.broken.prepareEarly && statErr == nil) { // broken: what was prepared at allocation is handed out as it is
		idents, fabricUUIDs, err := p.onThisNode(ctx, mine)
		if err != nil {
			return kubeletplugin.PrepareResult{Err: err}
		}
		// The fabric manager learns that this node uses the devices until NodeUnprepareResources: a controller must
		// not detach or move them before, even once the claim is released in the API (a force-deleted pod).
		for _, u := range fabricUUIDs {
			if err := p.fabric.use(ctx, u, string(claim.UID), p.node); err != nil {
				return kubeletplugin.PrepareResult{Err: fmt.Errorf("mark device %s used on %s: %w", u, p.node, err)}
			}
		}
		p.mu.Lock()
		p.identities[claim.UID] = idents
		p.mu.Unlock()
		if err := writeSpec(p.cdiDir, p.driver, claim.UID, spec); err != nil {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("write CDI spec: %w", err)}
		}
	}
	result := kubeletplugin.PrepareResult{}
	for i, d := range mine {
		dev := kubeletplugin.Device{Requests: []string{d.Request}, PoolName: d.Pool, DeviceName: d.Device, CDIDeviceIDs: []string{ids[i]}}
		if p.broken.noCDI {
			dev.CDIDeviceIDs = nil
		}
		result.Devices = append(result.Devices, dev)
	}
	return result
}

// onThisNode refuses devices that are not on this node now: every allocated device must be one of its local devices
// or a fabric device the fabric manager reports attached here (identified through the uuid attribute of the slice
// entry the claim was allocated; an entry without one, a counted fabric entry, through an attached device of its
// model). It returns the devices' identities and the fabric devices among them (their uuids in the fabric).
func (p *plugin) onThisNode(ctx context.Context, devices []allocated) ([]string, []string, error) {
	if len(devices) == 0 {
		return nil, nil, nil
	}
	slices, err := p.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + p.driver})
	if err != nil {
		return nil, nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	attached, err := p.fabric.attached(ctx)
	if err != nil {
		return nil, nil, err
	}
	var idents, fabricUUIDs []string
	for _, d := range devices {
		entry := findEntry(slices.Items, d)
		if entry == nil {
			return nil, nil, fmt.Errorf("device %s/%s is published in no ResourceSlice of %s", d.Pool, d.Device, p.driver)
		}
		if !present(p.node, p.local, attached, *entry) {
			return nil, nil, fmt.Errorf("device %s/%s is not attached to node %s (fabric manager): not prepared", d.Pool, d.Device, p.node)
		}
		idents = append(idents, stringAttribute(*entry, identityAttribute))
		if u := attachedHere(p.node, attached, *entry); u != "" {
			fabricUUIDs = append(fabricUUIDs, u)
		}
	}
	return idents, fabricUUIDs, nil
}

func findEntry(slices []resourceapi.ResourceSlice, d allocated) *resourceapi.Device {
	var found *resourceapi.Device
	var generation int64 = -1
	for i := range slices {
		s := &slices[i]
		if s.Spec.Pool.Name != d.Pool || s.Spec.Pool.Generation < generation {
			continue
		}
		for j := range s.Spec.Devices {
			if s.Spec.Devices[j].Name == d.Device {
				found, generation = &s.Spec.Devices[j], s.Spec.Pool.Generation
			}
		}
	}
	return found
}

// present: the published entry is a local device of node, or a fabric device attached to node.
func present(node string, local, attached []device, entry resourceapi.Device) bool {
	ident, model := stringAttribute(entry, identityAttribute), stringAttribute(entry, "model")
	for _, d := range local {
		if ident != "" && d.UUID == ident {
			return true
		}
	}
	for _, d := range attached {
		if d.Node == node && ((ident != "" && d.UUID == ident) || (ident == "" && model != "" && d.Model == model)) {
			return true
		}
	}
	return false
}

// attachedHere: the uuid of the fabric device attached to node that the published entry is (none: "").
func attachedHere(node string, attached []device, entry resourceapi.Device) string {
	ident, model := stringAttribute(entry, identityAttribute), stringAttribute(entry, "model")
	for _, d := range attached {
		if d.Node == node && ((ident != "" && d.UUID == ident) || (ident == "" && model != "" && d.Model == model)) {
			return d.UUID
		}
	}
	return ""
}

func stringAttribute(d resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

func (p *plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	results := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		if p.broken.neverUnprepare || p.broken.unprepareAfterDetach {
			// broken on purpose (the CDI spec): the node still tells the fabric that it let the devices go
			results[claim.UID] = p.fabric.release(ctx, string(claim.UID))
		}
		switch {
		case results[claim.UID] != nil:
		case p.broken.neverUnprepare:
			results[claim.UID] = nil
		case p.broken.unprepareAfterDetach:
			go p.removeAfterDetach(claim.UID)
			results[claim.UID] = nil
		default:
			// The spec first: the devices count as used until the node is done with them.
			results[claim.UID] = removeSpec(p.cdiDir, p.driver, claim.UID)
			if results[claim.UID] == nil {
				results[claim.UID] = p.fabric.release(ctx, string(claim.UID))
			}
			p.mu.Lock()
			delete(p.identities, claim.UID)
			p.mu.Unlock()
		}
		klog.FromContext(ctx).Info("NodeUnprepareResources", "claim", claim.NamespacedName, "uid", claim.UID, "err", results[claim.UID])
	}
	return results, nil
}

// removeAfterDetach (broken): the spec goes only 3 s after the fabric lists none of the claim's devices attached here.
func (p *plugin) removeAfterDetach(uid types.UID) {
	p.mu.Lock()
	idents := p.identities[uid]
	delete(p.identities, uid)
	p.mu.Unlock()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		attached, err := p.fabric.attached(context.Background())
		if err == nil && !anyAttachedTo(p.node, attached, idents) {
			break
		}
		time.Sleep(p.interval)
	}
	time.Sleep(3 * time.Second) // well after the detach, so a reader of the node cannot miss it
	_ = removeSpec(p.cdiDir, p.driver, uid)
	klog.InfoS("removed the CDI spec after the detach (broken mode)", "uid", uid)
}

// anyAttachedTo: the fabric lists one of idents attached to node.
func anyAttachedTo(node string, attached []device, idents []string) bool {
	for _, d := range attached {
		for _, ident := range idents {
			if d.Node == node && d.UUID == ident {
				return true
			}
		}
	}
	return false
}

// WatchHealthStatus: fake devices have no health to report (the health service is also turned off in main).
func (p *plugin) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

func (p *plugin) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
}

// publish keeps this node's pool equal to desired(): polls the fabric manager (the hot-plug) and, with the deny
// list, the fabric pools' identities; hands the helper a new pool only when its content changes.
func (p *plugin) publish(ctx context.Context, helper *kubeletplugin.Helper) {
	var last []device
	first := true
	for {
		devices, err := p.desiredNow(ctx)
		if err != nil {
			klog.ErrorS(err, "keeping the published slice")
		} else if first || !reflect.DeepEqual(devices, last) {
			entries := make([]resourceapi.Device, 0, len(devices))
			for _, d := range devices {
				entries = append(entries, d.entry())
			}
			pools := map[string]resourceslice.Pool{p.node: {Slices: []resourceslice.Slice{{Devices: entries}}}}
			if err := helper.PublishResources(ctx, resourceslice.DriverResources{Pools: pools}); err != nil {
				klog.ErrorS(err, "publish")
			} else {
				klog.InfoS("published the node's slice", "node", p.node, "devices", names(devices))
				last, first = devices, false
				p.published.Store(true)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.interval):
		}
	}
}

func (p *plugin) desiredNow(ctx context.Context) ([]device, error) {
	var attached []device
	fabricPool := map[string]bool{}
	if p.policy.republish {
		var err error
		if attached, err = p.fabric.attached(ctx); err != nil {
			return nil, err
		}
		hot := false
		for _, d := range attached {
			hot = hot || d.Node == p.node
		}
		if hot && p.policy.denyList { // the (large) fabric slices are read only when something is hot-plugged here
			slices, err := p.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + p.driver})
			if err != nil {
				return nil, err
			}
			for _, s := range slices.Items {
				if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
					continue
				}
				for _, d := range s.Spec.Devices {
					if ident := stringAttribute(d, identityAttribute); ident != "" {
						fabricPool[ident] = true
					}
				}
			}
		}
	}
	return desired(p.node, p.local, attached, fabricPool, p.policy), nil
}

func names(devices []device) []string {
	out := make([]string, 0, len(devices))
	for _, d := range devices {
		out = append(out, d.Name)
	}
	return out
}

func main() {
	driver := flag.String("driver", "", "DRA driver name (default: the config's)")
	node := flag.String("node-name", os.Getenv("NODE_NAME"), "name of this node (default $NODE_NAME)")
	cdiDir := flag.String("cdi-dir", "/var/run/cdi", "where containerd looks for CDI specs")
	config := flag.String("config", "", "the node driver's config (nodes and their local devices, YAML)")
	fabricURL := flag.String("fabric-manager", "", "base URL of the fabric manager, e.g. http://fabric-manager:8790")
	republish := flag.Bool("republish", true, "advertise fabric devices hot-plugged into this node")
	denyList := flag.Bool("deny-list", false, "do not advertise a hot-plugged device while the fabric pool still offers it")
	interval := flag.Duration("interval", 500*time.Millisecond, "between polls of the fabric manager")
	health := flag.String("health-address", ":8081", "serves /readyz: 200 once registered with the kubelet and published")
	var b broken
	flag.BoolVar(&b.noCDI, "broken-no-cdi", false, "selftests: prepared devices get no CDI device")
	flag.BoolVar(&b.prepareEarly, "broken-prepare-early", false, "selftests: prepare claims at allocation, before binding and attach")
	flag.BoolVar(&b.unprepareAfterDetach, "broken-unprepare-after-detach", false, "selftests: remove the CDI spec only after the detach")
	flag.BoolVar(&b.neverUnprepare, "broken-never-unprepare", false, "selftests: never remove the CDI spec")
	klog.InitFlags(nil)
	flag.Parse()
	if *node == "" || *config == "" || *fabricURL == "" {
		klog.Fatal("--node-name (or NODE_NAME), --config and --fabric-manager are required")
	}
	configured, local, err := loadLocal(*config, *node)
	if err != nil {
		klog.Fatalf("config: %v", err)
	}
	if *driver == "" {
		*driver = configured
	}
	restConfig, err := rest.InClusterConfig()
	if err != nil {
		klog.Fatalf("in-cluster config: %v", err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
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
	p := &plugin{driver: *driver, node: *node, cdiDir: *cdiDir, client: client, fabric: newFabricClient(*fabricURL),
		local: local, policy: policy{republish: *republish, denyList: *denyList}, interval: *interval, broken: b,
		identities: map[types.UID][]string{}}
	helper, err := kubeletplugin.Start(ctx, p,
		kubeletplugin.DriverName(*driver), kubeletplugin.NodeName(*node), kubeletplugin.KubeClient(client),
		kubeletplugin.HealthService(false))
	if err != nil {
		klog.Fatalf("start kubelet plugin: %v", err)
	}
	klog.InfoS("kubelet plugin started", "driver", *driver, "node", *node, "local", names(local), "broken", fmt.Sprintf("%+v", b))
	if b.prepareEarly {
		go p.prepareAtAllocation(ctx)
	}
	go p.publish(ctx, helper)
	go serveHealth(ctx, *health, func() error {
		if status := helper.RegistrationStatus(); status == nil || !status.PluginRegistered {
			return fmt.Errorf("not registered with the kubelet yet")
		}
		if !p.published.Load() {
			return fmt.Errorf("the node's slice is not published yet")
		}
		return nil
	})
	<-ctx.Done()
	helper.Stop()
	// Stopped (the DaemonSet is deleted, or the pod replaced): the node's slice goes now, as the Python node driver's
	// did, not the kubelet's 30 s after the deregistration; a replacement publishes it again.
	cleanup, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	selector := metav1.ListOptions{FieldSelector: "spec.driver=" + *driver + ",spec.nodeName=" + *node}
	if err := client.ResourceV1().ResourceSlices().DeleteCollection(cleanup, metav1.DeleteOptions{}, selector); err != nil {
		klog.ErrorS(err, "remove the node's slices")
	} else {
		klog.InfoS("removed the node's slices", "node", *node)
	}
}

func serveHealth(ctx context.Context, address string, ready func() error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	server := &http.Server{Addr: address, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = server.Close() }()
	if err := server.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		klog.ErrorS(err, "health server")
	}
}
