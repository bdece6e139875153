#!/bin/bash
# Stand-in for kindnetd (kind's CNI daemon, whose module the Go proxy does not serve), run by kind's own kindnet
# DaemonSet (host network, NET_ADMIN): for each node, a route to its podCIDR through its InternalIP, and on this
# node a ptp CNI config over its own podCIDR. Enough for pod traffic across nodes; no masquerade, no NetworkPolicy.
# It reconciles what the API lists on every change it watches (kubectl's in-cluster config: the ServiceAccount).
set -u
CONF=/etc/cni/net.d/10-kindnet.conflist

reconcile() {
  kubectl get nodes -o json | jq -r '.items[] | [(.status.addresses[] | select(.type == "InternalIP") | .address),
    (.spec.podCIDR // "")] | @tsv' | while read -r ip cidr; do
    [ -n "$cidr" ] || continue
    if [ "$ip" = "$HOST_IP" ]; then
      cat > "$CONF.tmp" <<CNI
{"cniVersion": "0.3.1", "name": "kindnet", "plugins": [
  {"type": "ptp", "ipMasq": false, "mtu": 1500,
   "ipam": {"type": "host-local", "dataDir": "/run/cni-ipam-state", "routes": [{"dst": "0.0.0.0/0"}],
            "ranges": [[{"subnet": "$cidr"}]]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
CNI
      if cmp -s "$CONF.tmp" "$CONF"; then rm -f "$CONF.tmp"; else mv "$CONF.tmp" "$CONF"; echo "wrote $CONF ($cidr)"; fi
    else
      ip route replace "$cidr" via "$ip" && echo "route $cidr via $ip"
    fi
  done
}

reconcile
# Every node event (a new node, its podCIDR set) triggers a pass; the watch is reopened when it ends.
while true; do
  kubectl get nodes --watch --output-watch-events -o name 2>&1 | while read -r _; do reconcile; done
  sleep 1  # the watch ended (apiserver restarting): reopen it, without spinning
done
