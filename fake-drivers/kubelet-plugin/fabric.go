package main

// What the plugin asks the fabric manager: which devices are attached where (hot-plug, and the check that a device
// the kubelet asks to prepare is attached to this node).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

type fabricClient struct {
	base string
	http *http.Client
}

func newFabricClient(base string) *fabricClient {
	return &fabricClient{base: base, http: &http.Client{Timeout: 5 * time.Second}}
}

// attached lists the devices whose attach completed (an attach in progress is not hot-plugged yet).
func (f *fabricClient) attached(ctx context.Context) ([]device, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base+"/v1/devices?state=attached", nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fabric manager %s: %w", f.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fabric manager %s: %s", f.base, resp.Status)
	}
	var body struct {
		Devices []device `json:"devices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("fabric manager %s: %w", f.base, err)
	}
	return body.Devices, nil
}
