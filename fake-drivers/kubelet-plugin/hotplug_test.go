package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// A stand-in fabric manager (its /v1/devices?state=attached answer) and a fake clientset holding the fabric pool:
// the plugin's poll shows a device hot-plugged into its node, hides it while the fabric pool offers it (deny list),
// and prepares only what is attached to its node.
func fabricServer(t *testing.T, devices *[]device) *httptest.Server {
	t.Helper()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/devices" || r.URL.Query().Get("state") != "attached" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"devices": *devices})
	}))
	t.Cleanup(server.Close)
	return server
}

func fabricPool(uuids ...string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "fabric-0"}}
	s.Spec.Driver, s.Spec.Pool = "gpu.fabric.example.com", resourceapi.ResourcePool{Name: "fabric-0", Generation: 1}
	s.Spec.NodeSelector = nil
	for _, u := range uuids {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: "fabric-0-" + u,
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"uuid": {StringValue: ptr.To(u)},
				"model": {StringValue: ptr.To("fake-gpu")}}})
	}
	return s
}

func TestThePollShowsAHotPluggedDeviceUnlessTheFabricPoolOffersIt(t *testing.T) {
	attached := []device{{Name: "fake-gpu-3", UUID: "f3", Model: "fake-gpu", Node: "w", Fabric: "fabric-0",
		Attributes: map[string]any{"memoryGiB": 80.0}}}
	server := fabricServer(t, &attached)
	client := fake.NewSimpleClientset(fabricPool("f3"))
	p := &plugin{driver: "gpu.fabric.example.com", node: "w", client: client, fabric: newFabricClient(server.URL),
		local: []device{{Name: "local-fake-gpu-0", UUID: "l0", Model: "fake-gpu"}}}

	p.policy = policy{republish: true}
	got, err := p.desiredNow(context.Background())
	if err != nil || !equal(names(got), []string{"fake-gpu-3", "local-fake-gpu-0"}) {
		t.Fatalf("republish: %v %v", names(got), err)
	}
	if mem := got[0].entry().Attributes["memoryGiB"]; mem.IntValue == nil || *mem.IntValue != 80 {
		t.Fatalf("the fabric's attribute was not kept as an int: %+v", mem)
	}
	p.policy = policy{republish: true, denyList: true}
	if got, err = p.desiredNow(context.Background()); err != nil || !equal(names(got), []string{"local-fake-gpu-0"}) {
		t.Fatalf("deny list, offered by the fabric pool: %v %v", names(got), err)
	}
	if err := client.ResourceV1().ResourceSlices().Delete(context.Background(), "fabric-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err = p.desiredNow(context.Background()); err != nil || !equal(names(got), []string{"fake-gpu-3", "local-fake-gpu-0"}) {
		t.Fatalf("deny list, no longer offered: %v %v", names(got), err)
	}
}

func TestOnlyAFabricDeviceAttachedToThisNodeIsPrepared(t *testing.T) {
	attached := []device{{Name: "fake-gpu-3", UUID: "f3", Model: "fake-gpu", Node: "elsewhere"}}
	server := fabricServer(t, &attached)
	client := fake.NewSimpleClientset(fabricPool("f3"))
	p := &plugin{driver: "gpu.fabric.example.com", node: "w", client: client, fabric: newFabricClient(server.URL)}
	claimed := []allocated{{Request: "gpu", Pool: "fabric-0", Device: "fabric-0-f3"}}
	if _, _, err := p.onThisNode(context.Background(), claimed); err == nil {
		t.Fatal("prepared a device the fabric lists attached to another node")
	}
	attached[0].Node = "w"
	idents, fabricUUIDs, err := p.onThisNode(context.Background(), claimed)
	if err != nil || !equal(idents, []string{"f3"}) || !equal(fabricUUIDs, []string{"f3"}) {
		t.Fatalf("the attached device was refused: %v %v %v", idents, fabricUUIDs, err)
	}
}
