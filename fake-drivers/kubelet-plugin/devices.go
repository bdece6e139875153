package main

// What this node's pool holds: its local devices (from the node driver's config, the same file and the same names
// and identities as the Python fake-node-driver gives them) and the fabric devices the fabric manager reports
// attached to this node (the hot-plug), unless the deny list hides them while the fabric pool still offers them.
// Pure functions, so the policy is unit-tested (devices_test.go).

import (
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/google/uuid"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

const identityAttribute = "uuid"

// localNamespace is uuid5(NAMESPACE_DNS, "fake-node-driver.dra.example.com"), as fake_drivers.nodedriver.config.
var localNamespace = uuid.NewSHA1(uuid.NameSpaceDNS, []byte("fake-node-driver.dra.example.com"))

// device is one device as a driver publishes it: its name in the pool, physical identity, model, other attributes.
type device struct {
	Name       string         `json:"name"`
	UUID       string         `json:"uuid"`
	Model      string         `json:"model"`
	Attributes map[string]any `json:"attributes"`
	Node       string         `json:"node"`   // fabric devices: the node they are attached to
	Fabric     string         `json:"fabric"` // fabric devices: the fabric (the fabric pool's name)
}

type localGroup struct {
	Model      string         `json:"model"`
	Count      *int           `json:"count"`
	Attributes map[string]any `json:"attributes"`
}

type nodesFile struct {
	Driver string `json:"driver"`
	Nodes  map[string]struct {
		Local []localGroup `json:"local"`
	} `json:"nodes"`
}

// loadLocal reads the node driver's config (nodes.yaml) and returns the driver name and this node's local devices.
func loadLocal(path, node string) (string, []device, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	var cfg nodesFile
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return "", nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []device
	for _, group := range cfg.Nodes[node].Local {
		count := 1
		if group.Count != nil {
			count = *group.Count
		}
		for i := 0; i < count; i++ {
			ident := uuid.NewSHA1(localNamespace, []byte(fmt.Sprintf("%s/%s/%d", node, group.Model, i)))
			out = append(out, device{
				Name: fmt.Sprintf("local-%s-%d", group.Model, i), UUID: ident.String(), Model: group.Model,
				Attributes: group.Attributes,
			})
		}
	}
	return cfg.Driver, out, nil
}

// attribute is a typed DeviceAttribute: JSON numbers that are whole become int, as Python's typed_attribute.
func attribute(value any) resourceapi.DeviceAttribute {
	switch v := value.(type) {
	case bool:
		return resourceapi.DeviceAttribute{BoolValue: ptr.To(v)}
	case float64:
		if v == math.Trunc(v) {
			return resourceapi.DeviceAttribute{IntValue: ptr.To(int64(v))}
		}
		return resourceapi.DeviceAttribute{StringValue: ptr.To(fmt.Sprint(v))}
	case int:
		return resourceapi.DeviceAttribute{IntValue: ptr.To(int64(v))}
	case int64:
		return resourceapi.DeviceAttribute{IntValue: ptr.To(v)}
	default:
		return resourceapi.DeviceAttribute{StringValue: ptr.To(fmt.Sprint(v))}
	}
}

// entry is the ResourceSlice device of d: identity and model win over same-named extra attributes.
func (d device) entry() resourceapi.Device {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
	for k, v := range d.Attributes {
		attrs[resourceapi.QualifiedName(k)] = attribute(v)
	}
	attrs[identityAttribute] = resourceapi.DeviceAttribute{StringValue: ptr.To(d.UUID)}
	attrs["model"] = resourceapi.DeviceAttribute{StringValue: ptr.To(d.Model)}
	return resourceapi.Device{Name: d.Name, Attributes: attrs}
}

type policy struct {
	republish bool // advertise fabric devices hot-plugged into this node
	denyList  bool // ... but not while the fabric pool still offers them (keep-in-pool)
}

// desired is this node's pool: local devices, then the hot-plugged ones the policy shows, sorted by name.
func desired(node string, local, attached []device, fabricPool map[string]bool, p policy) []device {
	out := append([]device(nil), local...)
	if p.republish {
		for _, d := range attached {
			if d.Node == node && !(p.denyList && fabricPool[d.UUID]) {
				out = append(out, d)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
