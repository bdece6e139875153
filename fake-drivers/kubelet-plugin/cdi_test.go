package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestBuildSpecNamesEveryDeviceAndSetsItsEnv(t *testing.T) {
	devices := []allocated{{"gpu", "fabric-0", "fabric-0-fake-gpu-1"}, {"gpu", "node-0", "gpu-0"}}
	spec, ids := buildSpec("gpu.fabric.example.com", "uid-1", devices)
	if spec.Kind != "gpu.fabric.example.com/device" || len(spec.Devices) != 2 {
		t.Fatalf("unexpected spec %+v", spec)
	}
	want := "gpu.fabric.example.com/device=uid-1-fabric-0-fabric-0-fake-gpu-1"
	if ids[0] != want {
		t.Fatalf("id %q, want %q", ids[0], want)
	}
	if env := spec.Devices[0].ContainerEdits.Env[0]; env != "DRA_DEVICE_GPU_FABRIC_0_FAKE_GPU_1=fabric-0/fabric-0-fake-gpu-1" {
		t.Fatalf("env %q", env)
	}
}

func TestWriteAndRemoveSpecAreIdempotent(t *testing.T) {
	dir := t.TempDir()
	spec, _ := buildSpec("gpu.fabric.example.com", "uid-2", []allocated{{"gpu", "p", "d"}})
	if err := writeSpec(dir, "gpu.fabric.example.com", "uid-2", spec); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "gpu.fabric.example.com-uid-2.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back cdiSpec
	if err := json.Unmarshal(data, &back); err != nil || back.Version != cdiVersion {
		t.Fatalf("read back %+v, %v", back, err)
	}
	for range 2 {
		if err := removeSpec(dir, "gpu.fabric.example.com", "uid-2"); err != nil {
			t.Fatal(err)
		}
	}
}
