package main

// What the plugin asks the fabric manager: which devices are attached where (hot-plug, and the check that a device
// the kubelet asks to prepare is attached to this node); and what it tells it: which devices this node uses for which
// claim, from NodePrepareResources until NodeUnprepareResources.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
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

// use marks the device used on node for the claim (uid); refused unless the fabric lists it attached there.
func (f *fabricClient) use(ctx context.Context, uuid, claim, node string) error {
	body, _ := json.Marshal(map[string]string{"claim": claim, "node": node})
	return f.call(ctx, http.MethodPost, "/v1/devices/"+url.PathEscape(uuid)+"/uses", body)
}

// release tells the fabric manager that no device is used for the claim (uid) on this node any more.
func (f *fabricClient) release(ctx context.Context, claim string) error {
	return f.call(ctx, http.MethodDelete, "/v1/uses/"+url.PathEscape(claim), nil)
}

func (f *fabricClient) call(ctx context.Context, method, path string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, f.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.http.Do(req)
	if err != nil {
		return fmt.Errorf("fabric manager %s: %w", f.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
		return fmt.Errorf("fabric manager %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(text))
	}
	return nil
}
