package main

// CDI specs for prepared claims: one JSON file per claim in the CDI directory, which containerd reads when it
// creates a container that names one of its devices. The devices are fake: each only sets environment variables
// that say which DRA device (pool/device) the container got, so a test can read them back from the pod.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

const (
	cdiVersion = "0.6.0"
	cdiClass   = "device"
)

// cdiSpec is the subset of the CDI specification (container-device-interface, spec version 0.6.0) we write.
type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name           string        `json:"name"`
	ContainerEdits cdiContainerE `json:"containerEdits"`
}

type cdiContainerE struct {
	Env []string `json:"env"`
}

// allocated is one device of a claim's allocation that belongs to this driver.
type allocated struct {
	Request string
	Pool    string
	Device  string
}

var notName = regexp.MustCompile(`[^A-Za-z0-9_.:-]`)
var notEnv = regexp.MustCompile(`[^A-Za-z0-9_]`)

// cdiKind is "<vendor>/<class>"; the driver name is a DNS subdomain, which CDI accepts as a vendor.
func cdiKind(driver string) string { return driver + "/" + cdiClass }

func cdiDeviceName(claim types.UID, d allocated) string {
	return notName.ReplaceAllString(fmt.Sprintf("%s-%s-%s", claim, d.Pool, d.Device), "_")
}

// specPath is where the spec of one claim lives; its name is unique per driver and claim.
func specPath(dir, driver string, claim types.UID) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%s.json", notName.ReplaceAllString(driver, "_"), claim))
}

// buildSpec returns the spec of one claim and the CDI device id of each allocated device, in order.
func buildSpec(driver string, claim types.UID, devices []allocated) (cdiSpec, []string) {
	spec := cdiSpec{Version: cdiVersion, Kind: cdiKind(driver)}
	ids := make([]string, 0, len(devices))
	for _, d := range devices {
		name := cdiDeviceName(claim, d)
		env := strings.ToUpper(notEnv.ReplaceAllString(d.Request+"_"+d.Device, "_"))
		spec.Devices = append(spec.Devices, cdiDevice{
			Name:           name,
			ContainerEdits: cdiContainerE{Env: []string{fmt.Sprintf("DRA_DEVICE_%s=%s/%s", env, d.Pool, d.Device)}},
		})
		ids = append(ids, spec.Kind+"="+name)
	}
	return spec, ids
}

// writeSpec writes the spec atomically (containerd may read the directory at any moment).
func writeSpec(dir, driver string, claim types.UID, spec cdiSpec) error {
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := specPath(dir, driver, claim)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// removeSpec deletes the spec of a claim; a spec that is already gone is not an error (unprepare is repeated).
func removeSpec(dir, driver string, claim types.UID) error {
	err := os.Remove(specPath(dir, driver, claim))
	if os.IsNotExist(err) {
		return nil
	}
	return err
}
