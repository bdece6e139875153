"""The reference composable controller (KEP-5007): fabric pool, attach before bind, conditions, detach on release.

Modules, one responsibility each:
- ``settings``: what an operator configures (driver, mode, timings) and the names derived from it.
- ``model``: typed, read-only views of the cluster objects and fabric devices the decisions look at.
- ``decide``: the reconcile decisions as one pure function (snapshot in, plan out): unit-tested without an API.
- ``objects``: the manifests and status entries the controller writes (slices, taint rules, conditions).
- ``fabric``: the fabric manager's HTTP API.
- ``kube``: writes to the Kubernetes API, with conflict retries.
- ``watch``: list+watch caches that wake the reconciler.
- ``reconciler``: the loop: snapshot, decide, execute; attach/detach workers.
- ``statelog`` and ``metrics``: one log line per state change; attach/detach latency metrics.
- ``cli``: the ``reference-controller`` command.
"""
