package main

// Broken on purpose (--broken-prepare-early, NODE-2): the plugin prepares a claim as soon as the scheduler allocates
// it a device for this node, before the pod is bound and before the fabric attached the device, and hands that spec
// out when the kubelet later asks. Needs list on resourceclaims, which the correct plugin does not have.

import (
	"context"
	"os"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

func (p *plugin) prepareAtAllocation(ctx context.Context) {
	for ctx.Err() == nil {
		claims, err := p.client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
		if err != nil {
			klog.ErrorS(err, "list claims (broken mode)")
		} else {
			for i := range claims.Items {
				claim := &claims.Items[i]
				if !allocatedTo(claim, p.node) || len(p.mine(claim)) == 0 {
					continue
				}
				if _, err := os.Stat(specPath(p.cdiDir, p.driver, claim.UID)); err == nil {
					continue
				}
				spec, _ := buildSpec(p.driver, claim.UID, p.mine(claim))
				if err := writeSpec(p.cdiDir, p.driver, claim.UID, spec); err == nil {
					klog.InfoS("prepared at allocation (broken mode)", "claim", klog.KObj(claim), "uid", claim.UID)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// allocatedTo: the claim's allocation selects exactly this node by name (bindsToNode, or a node-local pool).
func allocatedTo(claim *resourceapi.ResourceClaim, node string) bool {
	a := claim.Status.Allocation
	if a == nil || a.NodeSelector == nil {
		return false
	}
	for _, term := range a.NodeSelector.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" {
				for _, v := range f.Values {
					if v == node {
						return true
					}
				}
			}
		}
	}
	return false
}
