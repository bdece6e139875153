package main

import (
	"os"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

func writeConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nodes.yaml")
	text := "driver: gpu.fabric.example.com\nnodes:\n  w:\n    local: [{model: fake-gpu, count: 2, " +
		"attributes: {memoryGiB: 80, vendor: x, ok: true}}]\n  other: {}\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The Python fake-node-driver gives local devices the same names and identities (its uuid5 of node/model/index).
func TestLocalDevicesMatchThePythonNodeDriver(t *testing.T) {
	driver, local, err := loadLocal(writeConfig(t), "w")
	if err != nil || driver != "gpu.fabric.example.com" || len(local) != 2 {
		t.Fatalf("driver %q local %+v err %v", driver, local, err)
	}
	if local[0].Name != "local-fake-gpu-0" || local[0].UUID != "c03b0d1a-f20e-52ee-ae20-6885cd0858fa" ||
		local[1].UUID != "52bda3c1-8fb0-51ce-b5cb-5331eac78a79" {
		t.Fatalf("unexpected local devices %+v", local)
	}
	entry := local[0].entry()
	a := entry.Attributes
	if *a["memoryGiB"].IntValue != 80 || *a["vendor"].StringValue != "x" || !*a["ok"].BoolValue ||
		*a["uuid"].StringValue != local[0].UUID || *a["model"].StringValue != "fake-gpu" {
		t.Fatalf("unexpected attributes %+v", a)
	}
	if _, none, _ := loadLocal(writeConfig(t), "other"); len(none) != 0 {
		t.Fatalf("a node without local devices got %+v", none)
	}
}

func TestAConfigWithUnknownKeysIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nodes.yaml")
	_ = os.WriteFile(path, []byte("driver: d\nnodez: {}\n"), 0o644)
	if _, _, err := loadLocal(path, "w"); err == nil {
		t.Fatal("unknown key accepted")
	}
}

func TestHotPluggedDevicesShowUpOnTheirNodeUnlessTheDenyListHidesThem(t *testing.T) {
	local := []device{{Name: "local-fake-gpu-0", UUID: "l0", Model: "fake-gpu"}}
	attached := []device{
		{Name: "fake-gpu-3", UUID: "f3", Model: "fake-gpu", Node: "w"},
		{Name: "fake-gpu-4", UUID: "f4", Model: "fake-gpu", Node: "elsewhere"},
		{Name: "fake-gpu-5", UUID: "f5", Model: "fake-gpu", Node: "w"},
	}
	got := names(desired("w", local, attached, nil, policy{republish: true}))
	if want := []string{"fake-gpu-3", "fake-gpu-5", "local-fake-gpu-0"}; !equal(got, want) {
		t.Fatalf("republish: %v, want %v", got, want)
	}
	offered := map[string]bool{"f3": true}
	got = names(desired("w", local, attached, offered, policy{republish: true, denyList: true}))
	if want := []string{"fake-gpu-5", "local-fake-gpu-0"}; !equal(got, want) {
		t.Fatalf("deny list: %v, want %v", got, want)
	}
	if got = names(desired("w", local, attached, nil, policy{})); !equal(got, []string{"local-fake-gpu-0"}) {
		t.Fatalf("no republish: %v", got)
	}
}

func TestOnlyDevicesOnThisNodeArePresent(t *testing.T) {
	entry := func(ident, model string) resourceapi.Device {
		attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To(model)}}
		if ident != "" {
			attrs["uuid"] = resourceapi.DeviceAttribute{StringValue: ptr.To(ident)}
		}
		return resourceapi.Device{Name: "x", Attributes: attrs}
	}
	local := []device{{UUID: "l0", Model: "fake-gpu"}}
	attached := []device{{UUID: "f3", Model: "fake-gpu", Node: "w"}, {UUID: "f4", Model: "big-gpu", Node: "v"}}
	cases := []struct {
		entry resourceapi.Device
		want  bool
	}{
		{entry("l0", "fake-gpu"), true},  // local
		{entry("f3", "fake-gpu"), true},  // attached here
		{entry("f4", "big-gpu"), false},  // attached to another node
		{entry("f9", "fake-gpu"), false}, // not attached anywhere
		{entry("", "fake-gpu"), true},    // counted entry: a device of its model is attached here
		{entry("", "big-gpu"), false},    // counted entry: none of its model here
	}
	for i, c := range cases {
		if got := present("w", local, attached, c.entry); got != c.want {
			t.Errorf("case %d: present=%v, want %v", i, got, c.want)
		}
	}
}

func TestTheAllocationNamesTheNode(t *testing.T) {
	claim := &resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
	if allocatedTo(claim, "w") {
		t.Fatal("an allocation without a node selector names no node")
	}
}

func TestFindEntryTakesTheNewestGenerationOfThePool(t *testing.T) {
	slice := func(gen int64, ident string) resourceapi.ResourceSlice {
		s := resourceapi.ResourceSlice{}
		s.Spec.Pool = resourceapi.ResourcePool{Name: "fabric-0", Generation: gen}
		s.Spec.Devices = []resourceapi.Device{{Name: "d", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"uuid": {StringValue: ptr.To(ident)}}}}
		return s
	}
	got := findEntry([]resourceapi.ResourceSlice{slice(2, "new"), slice(1, "old")}, allocated{Pool: "fabric-0", Device: "d"})
	if got == nil || stringAttribute(*got, "uuid") != "new" {
		t.Fatalf("found %+v", got)
	}
	if findEntry(nil, allocated{Pool: "fabric-0", Device: "d"}) != nil {
		t.Fatal("found a device in no slice")
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
