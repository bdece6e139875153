"""Reach: which nodes the implementation's fabric pools reach, what it owes there, and why it is missing.

An implementation owes (within promises.publishSeconds of its readiness) that every fabric pool reaches at least one
Ready schedulable node and, where scenarios need one, that some node without node-local devices of its driver is
reached by a fabric pool. When that is not so, `explain` says it in words a vendor can act on: each fabric pool, its
node selector (or allNodes), which nodes it matches, and which label (key=value) each node lacks for it. Pure
functions over slices and nodes, so the unit tests feed them synthetic ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from conformance.cluster.providers.base import NodeSpec
from conformance.observe.slices import fabric_slices, reaches


def selector_text(spec: dict[str, Any]) -> str:
    """A slice's reach in one short phrase: nodeName, allNodes or its node selector's terms."""
    if spec.get("nodeName"):
        return f"nodeName {spec['nodeName']}"
    if spec.get("allNodes"):
        return "allNodes"
    if spec.get("perDeviceNodeSelection"):
        return "perDeviceNodeSelection"
    terms = (spec.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    if not terms:
        return "no nodeSelector, nodeName or allNodes"
    shown = []
    for term in terms:
        parts = [_expression_text(e) for e in term.get("matchExpressions") or []]
        parts += [_expression_text(e) for e in term.get("matchFields") or []]
        shown.append(" and ".join(parts) or "(empty term)")
    return "nodeSelector " + " or ".join(f"[{t}]" for t in shown)


def _expression_text(expr: dict[str, Any]) -> str:
    key, op, values = expr["key"], expr["operator"], list(expr.get("values") or [])
    if op == "In" and len(values) == 1:
        return f"{key}={values[0]}"
    if op in ("Exists", "DoesNotExist"):
        return f"{key} {op}"
    return f"{key} {op} {values}"


def _unmet(expr: dict[str, Any], values_of: dict[str, str]) -> str | None:
    """What a node lacks for one selector expression (None: it meets it)."""
    key, op, values = expr["key"], expr["operator"], list(expr.get("values") or [])
    has = f"{key}={values_of[key]}" if key in values_of else f"no {key}"
    if op == "In" and values_of.get(key) not in values:
        want = f"{key}={values[0]}" if len(values) == 1 else f"{key} in {values}"
        return f"{want} (has {has})"
    if op == "NotIn" and values_of.get(key) in values:
        return f"{key} not in {values} (has {has})"
    if op == "Exists" and key not in values_of:
        return f"a label {key}"
    if op == "DoesNotExist" and key in values_of:
        return f"no label {key} (has {has})"
    if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
        return f"{key} {op} {values} (operator not judged)"
    return None


def lacks(spec: dict[str, Any], node: NodeSpec) -> str | None:
    """What `node` lacks to be reached by a slice with this spec (None: the slice reaches it). For a selector of
    several terms (ORed), what the node lacks for each."""
    if reaches({"spec": spec}, node.name, node.labels):
        return None
    if spec.get("nodeName"):
        return f"is not {spec['nodeName']}"
    terms = (spec.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    if not terms:
        return "is not selected (the slice names no nodeSelector, nodeName or allNodes)"
    per_term = []
    for term in terms:
        unmet = [u for e in term.get("matchExpressions") or [] if (u := _unmet(e, node.labels))]
        unmet += [u for e in term.get("matchFields") or [] if (u := _unmet(e, {"metadata.name": node.name}))]
        per_term.append(", ".join(unmet) or "nothing named (not judged)")
    return "lacks " + (per_term[0] if len(per_term) == 1 else " / ".join(f"[{t}]" for t in per_term))


def pool_specs(slices: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Fabric pool name -> the specs of its slices."""
    pools: dict[str, list[dict[str, Any]]] = {}
    for s in fabric_slices(list(slices)):
        pools.setdefault(s["spec"]["pool"]["name"], []).append(s["spec"])
    return pools


def pool_reach(slices: Iterable[dict[str, Any]], nodes: Iterable[NodeSpec]) -> dict[str, list[str]]:
    """Fabric pool -> the nodes (of `nodes`) any slice of it reaches."""
    nodes = list(nodes)
    return {
        pool: sorted({n.name for spec in specs for n in nodes if reaches({"spec": spec}, n.name, n.labels)})
        for pool, specs in pool_specs(slices).items()
    }


def remote_nodes(slices: Iterable[dict[str, Any]], nodes: Iterable[NodeSpec], local: set[str]) -> list[str]:
    """Nodes without node-local devices of the driver that some fabric pool reaches."""
    reached = {n for names in pool_reach(slices, nodes).values() for n in names}
    return sorted(reached - local)


def shortfalls(slices: list[dict[str, Any]], nodes: list[NodeSpec], local: set[str], need_remote: bool) -> list[str]:
    """What the implementation owes in reach and has not published (empty: nothing), one short line each."""
    reach = pool_reach(slices, nodes)
    if not reach:
        return ["no fabric pool is published"]
    out = [f"fabric pool {p} reaches no Ready schedulable node" for p, names in sorted(reach.items()) if not names]
    if need_remote and not remote_nodes(slices, nodes, local):
        out.append("no node without node-local devices is reached by a fabric pool")
    return out


def explain(slices: list[dict[str, Any]], nodes: list[NodeSpec], local: set[str], limit: int = 6) -> str:
    """Each fabric pool: its selector, the nodes it matches (and which of them have node-local devices), and for the
    nodes it misses, grouped, the label they lack. One line, '; '-separated, so it can head a failure message."""
    specs = pool_specs(slices)
    if not specs:
        return "no fabric pool (a slice without nodeName whose devices carry bindingConditions) is published"
    parts = []
    for pool, pool_slices in sorted(specs.items()):
        selectors = sorted({selector_text(spec) for spec in pool_slices})
        matched = sorted({n.name for spec in pool_slices for n in nodes if reaches({"spec": spec}, n.name, n.labels)})
        missing: dict[str, list[str]] = {}
        for n in nodes:
            if n.name in matched:
                continue
            why = "; ".join(sorted({w for spec in pool_slices if (w := lacks(spec, n))}))
            missing.setdefault(why, []).append(n.name)
        if matched:
            remote = [n for n in matched if n not in local]
            seen = f"matches {_names(matched, limit)}" + (
                " (all with node-local devices)" if not remote else f", {len(remote)} without node-local devices"
            )
        else:
            seen = f"matches none of the {len(nodes)} Ready schedulable nodes"
        lacking = ", ".join(
            f"{_names(names, limit)} {why if len(names) == 1 else why.replace('lacks ', 'lack ', 1)}"
            for why, names in sorted(missing.items())
        )
        parts.append(f"fabric pool {pool} ({', '.join(selectors)}) {seen}" + (f"; {lacking}" if lacking else ""))
    return "; ".join(parts)


def _names(names: list[str], limit: int) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def selector_keys(slice_: dict[str, Any]) -> set[str]:
    """The node label keys a fabric slice's node selector names."""
    spec = slice_["spec"]
    if spec.get("nodeName") or not any(d.get("bindingConditions") for d in spec.get("devices") or []):
        return set()
    terms = (spec.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    return {e["key"] for t in terms for e in t.get("matchExpressions") or []}


def label_changes(node_records: Iterable[Any], keys: set[str]) -> list[tuple[float, str]]:
    """(time, "node-2 got a=b") for each change of the labels `keys` in a sequence of node records of the run-wide
    record (summaries with `labels`), in order; the first record of a node is its state, not a change."""
    last: dict[str, dict[str, str]] = {}
    out: list[tuple[float, str]] = []
    for r in node_records:
        labels = {k: v for k, v in (r.obj.get("labels") or {}).items() if k in keys}
        if r.type == "DELETED":
            last.pop(r.name, None)
            continue
        before = last.get(r.name)
        last[r.name] = labels
        if before is None:
            continue
        for key in sorted(set(before) | set(labels)):
            if before.get(key) != labels.get(key):
                change = f"got {key}={labels[key]}" if key in labels else f"lost {key}={before[key]}"
                out.append((r.at, f"{r.name} {change}"))
    return out
