#!/usr/bin/env bash
# Reproduces kube-scheduler's double allocation after a binding timeout (write-up: ../double-allocation-after-binding-
# timeout.md) on any cluster with DRA binding conditions (1.35+ with DRADeviceBindingConditions on; on by default from
# 1.36), with kubectl alone: no driver, no controller, no kubelet plugin (the pods never bind, nothing runs).
#
#   NODE=<a schedulable node> ./reproduce.sh        (default: the first node without a NoSchedule taint)
#
# It publishes two devices with binding conditions on NODE, creates PODS pods each with its own claim, and never writes
# a condition, so every allocation waits in PreBind until the scheduler's bindingTimeout and is then cleared and made
# again for a waiting pod. Every SAMPLE_S it LISTs the namespace's claims (one LIST is one consistent etcd snapshot)
# and reports every device that two claims hold in the same snapshot. It watches for ROUNDS binding timeouts (the
# timeout is read from nowhere: pass TIMEOUT_S if it is not 20; 600 is the scheduler's default), then cleans up.
# Exit status: 1 if a double allocation was seen (reproduced), 0 if not, 2 on a setup error.
set -euo pipefail
trap 'echo "setup or kubectl error at line $LINENO" >&2; exit 2' ERR
cd "$(dirname "$0")"

TIMEOUT_S=${TIMEOUT_S:-20}
ROUNDS=${ROUNDS:-3}
PODS=${PODS:-5}
SAMPLE_S=${SAMPLE_S:-0.2}
NS=${NS:-dra-double-$(date +%s)}
DRIVER=${DRIVER:-${NS}.repro.example.com}
NODE=${NODE:-$(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.spec.taints[*].effect}{"\n"}{end}' |
  awk '!/NoSchedule|NoExecute/ {print $1; exit}')}
[ -n "$NODE" ] || { echo "no schedulable node found; set NODE" >&2; exit 2; }

render() { sed -e "s|__DRIVER__|${DRIVER}|g" -e "s|__NS__|${NS}|g" -e "s|__NODE__|${NODE}|g" -e "s|__POD__|${2:-}|g" "$1"; }
cleanup() {
  kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
  kubectl delete resourceslice "$NS" >/dev/null 2>&1 || true
  kubectl delete deviceclass "$NS" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# The server's version (kubectl's own comes first in the output).
echo "kubernetes $(kubectl version -o json | awk -F'"' '/serverVersion/ {s = 1} s && /gitVersion/ {print $4; exit}'); node $NODE; namespace $NS"
render manifests.yaml | kubectl apply -f - >/dev/null
for i in $(seq 0 $((PODS - 1))); do render pod.yaml "app-$i" | kubectl apply -f - >/dev/null; done
echo "$PODS pods for 2 devices; binding conditions never written; watching $ROUNDS binding timeouts of ${TIMEOUT_S}s"

deadline=$(( $(date +%s) + ROUNDS * (TIMEOUT_S + 10) + 30 ))
seen=0
reported=""  # device and holders already reported (plain bash 3: no associative arrays)
while [ "$(date +%s)" -lt "$deadline" ]; do
  # claim resourceVersion devices..., for every claim in one LIST
  snapshot=$(kubectl get resourceclaims -n "$NS" -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.metadata.resourceVersion}{" "}{.status.allocation.devices.results[*].device}{"\n"}{end}')
  while read -r device holders; do
    key="$device $holders"
    if printf '%s\n' "$reported" | grep -Fxq -- "$key"; then continue; fi
    reported=$(printf '%s\n%s' "$reported" "$key")
    seen=$((seen + 1))
    echo "$(date -u +%H:%M:%S) DOUBLE ALLOCATION: $device held by $holders in one LIST"
  done < <(awk 'NF >= 3 { for (i = 3; i <= NF; i++) { n[$i]++; who[$i] = who[$i] " " $1 "(rv " $2 ")" } }
               END { for (d in n) if (n[d] > 1) print d who[d] }' <<<"$snapshot")
  sleep "$SAMPLE_S"
done

timeouts=$(kubectl get events -n "$NS" -o jsonpath='{range .items[*]}{.count}{" "}{.message}{"\n"}{end}' |
  awk '/binding timeout/ {n += ($1 ~ /^[0-9]+$/ ? $1 : 1)} END {print n + 0}')
echo "binding timeout events: $timeouts; double allocations seen: $seen"
[ "$seen" -eq 0 ]  && exit 0
exit 1
