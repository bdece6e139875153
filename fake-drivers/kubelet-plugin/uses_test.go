package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// A prepared fabric device is marked used by this node for the claim, and unmarked only after the claim's CDI spec is
// gone (NodeUnprepareResources): the fabric manager's word a controller waits for before it detaches or moves it.
func TestPrepareMarksTheFabricDeviceUsedAndUnprepareReleasesItAfterTheSpec(t *testing.T) {
	attached := []device{{Name: "fake-gpu-3", UUID: "f3", Model: "fake-gpu", Node: "w"}}
	var mu sync.Mutex
	var calls []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/devices":
			_ = json.NewEncoder(w).Encode(map[string]any{"devices": attached})
		case r.Method == http.MethodPost && r.URL.Path == "/v1/devices/f3/uses":
			var body map[string]string
			_ = json.NewDecoder(r.Body).Decode(&body)
			calls = append(calls, "use "+body["claim"]+" "+body["node"])
			_, _ = w.Write([]byte("{}"))
		case r.Method == http.MethodDelete && r.URL.Path == "/v1/uses/uid-1":
			calls = append(calls, "release uid-1")
			_, _ = w.Write([]byte(`{"removed": 1}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(server.Close)
	dir := t.TempDir()
	p := &plugin{driver: "gpu.fabric.example.com", node: "w", cdiDir: dir, client: fake.NewSimpleClientset(fabricPool("f3")),
		fabric: newFabricClient(server.URL), identities: map[types.UID][]string{}}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid-1"}}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: p.driver, Pool: "fabric-0", Device: "fabric-0-f3"}}}}
	if result := p.prepare(context.Background(), claim); result.Err != nil {
		t.Fatalf("prepare: %v", result.Err)
	}
	if !equal(calls, []string{"use uid-1 w"}) {
		t.Fatalf("prepare told the fabric %v", calls)
	}
	errs, err := p.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "uid-1"}})
	if err != nil || errs["uid-1"] != nil {
		t.Fatalf("unprepare: %v %v", err, errs)
	}
	if !equal(calls, []string{"use uid-1 w", "release uid-1"}) {
		t.Fatalf("unprepare told the fabric %v", calls)
	}
}
