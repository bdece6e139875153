"""`dra-conformance profile check`: what a run would do with a profile, said before any cluster work.

Three parts: the schema (load_profile), the placeholders and files the profile refers to (resolved statically:
the values a run fills in — ports, kubeconfigs — do not exist yet, their form is checked), and the plan: for each
requirement of the catalogue, whether its scenarios run or are skipped with this profile, and why. The plan uses the
runner's own skip rule (conformance.suite.gaps.profile_gap), so it predicts what a run skips for the profile;
a run may still skip a scenario for what only the cluster shows (its release, a node it cannot add), and
says why then.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from conformance.implementation.profile import (
    NODE,
    PLACEHOLDER,
    LoadedProfile,
    Process,
    Profile,
    Scope,
    placeholder_problem,
)
from conformance.report.catalogue import CATALOGUE, SUITE_REQUIREMENTS
from conformance.report.headline import conclude
from conformance.report.verdict import EXIT_PARTIAL, NOT_APPLICABLE
from conformance.suite.gaps import profile_gap
from conformance.suite.record import REGISTRY, known_capabilities

SUITE_PACKAGES = ("conformance.suite.cluster", "conformance.suite.implementation")
NO_PROFILE = "no implementation profile: the run certifies the cluster only"
DECLARED_FAILS = " (fails: the profile declares promises.reportsFailures: false)"


@dataclass(frozen=True)
class PlanRow:
    requirement: str
    level: str
    action: str  # run | fail (on the profile's own declaration) | skip | not-covered | not-applicable
    reason: str


@dataclass
class CheckResult:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    plan: list[PlanRow] = field(default_factory=list)
    verdict: list[str] = field(default_factory=list)  # what the run would end with (predict): the check's last lines


def _placeholder_errors(
    text: str, where: str, process: Process | None, profile: Profile, before: int, per_node: bool = False
) -> list[str]:
    """Problems of the placeholders in one profile string; `before`: how many processes start before this one;
    `per_node`: the string is used per node (a perNode process, a node hook)."""
    errors: list[str] = []
    scope = Scope(
        process=process,
        ported=frozenset(p.name for p in profile.processes[:before] if p.has_port),
        named_ports=frozenset(f"{p.name}:{port}" for p in profile.processes[:before] for port in p.named_ports),
        tls=frozenset(p.name for p in profile.processes if p.tls),
        per_node=per_node,
        per_node_processes=frozenset(p.name for p in profile.processes if p.per_node),
    )
    for match in PLACEHOLDER.finditer(text.replace(NODE, "node-0") if per_node else text):
        key, arg = match[1], match[2]
        problem = placeholder_problem(key, arg, scope)
        if problem:
            errors.append(f"{where}: {match[0]}: {problem}")
        elif key == "env" and arg not in os.environ:
            errors.append(f"{where}: {{env:{arg}}}: ${arg} is not set in this environment")
    return errors


def _resolve_static(text: str, loaded: LoadedProfile) -> str:
    """{profile_dir} and {bin} have their run-time values already; the others are left as they are."""
    return text.replace("{profile_dir}", str(loaded.path.parent)).replace("{bin}", str(Path(sys.executable).parent))


def _check_files(loaded: LoadedProfile, result: CheckResult) -> None:
    prof = loaded.profile
    for i, manifest in enumerate(prof.manifests):
        result.errors += _placeholder_errors(manifest, f"manifests.{i}", None, prof, 0)
        path = Path(_resolve_static(manifest, loaded))
        if "{" in str(path):
            continue
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        except OSError as exc:
            result.errors.append(f"manifests.{i}: cannot read {path}: {exc.strerror}")
            continue
        except yaml.YAMLError as exc:
            result.errors.append(f"manifests.{i}: {path} is not valid YAML: {exc}")
            continue
        bad = [n for n, d in enumerate(docs) if not (isinstance(d, dict) and d.get("apiVersion") and d.get("kind"))]
        if bad:
            result.errors.append(f"manifests.{i}: documents {bad} of {path} have no apiVersion/kind")
    for n, proc in enumerate(prof.processes):
        where = f"processes.{n} ({proc.name})"
        for j, arg in enumerate(proc.command):
            result.errors += _placeholder_errors(arg, f"{where}.command.{j}", proc, prof, n, proc.per_node)
        for key, value in proc.env.items():
            result.errors += _placeholder_errors(value, f"{where}.env.{key}", proc, prof, n, proc.per_node)
        exe = _resolve_static(proc.command[0], loaded)
        if "{" not in exe and not (Path(exe).is_file() or shutil.which(exe)):
            result.warnings.append(f"{where}: {exe!r} is neither a file nor on PATH here")
        result.errors += _placeholder_errors(proc.kubeconfig, f"{where}.kubeconfig", proc, prof, n, proc.per_node)
        if proc.ready and proc.ready.ca_file:
            result.errors += _placeholder_errors(proc.ready.ca_file, f"{where}.ready.caFile", proc, prof, n)
    everyone = len(prof.processes)
    named = (("fabricProbe", prof.fabric_probe), ("faultInjector", prof.fault_injector))
    for name, endpoint in (*named, ("readinessProbe", prof.readiness_probe)):
        if endpoint is None:
            continue
        for attr, text in (("url", endpoint.url), ("caFile", endpoint.ca_file), ("token", endpoint.token)):
            if text is not None:
                result.errors += _placeholder_errors(text, f"{name}.{attr}", None, prof, everyone)
        ca = _resolve_static(endpoint.ca_file or "", loaded)
        if ca and "{" not in ca and not Path(ca).is_file():
            result.errors.append(f"{name}.caFile: {ca} is not a file")
        if endpoint.ca_file and endpoint.url.startswith("http://"):
            result.errors.append(f"{name}: caFile is given for a plain http:// URL")
    hooks = [("hooks.setup", h, 0, False) for h in prof.hooks.setup]
    hooks += [("hooks.node", h, 0, True) for h in prof.hooks.node]
    hooks += [("hooks.teardown", h, 0, False) for h in prof.hooks.teardown]
    for where, hook, before, per_node in hooks:
        for j, arg in enumerate(hook.command):
            result.errors += _placeholder_errors(arg, f"{where}.{hook.name}.command.{j}", None, prof, before, per_node)
        for key, value in hook.env.items():
            result.errors += _placeholder_errors(value, f"{where}.{hook.name}.env.{key}", None, prof, before, per_node)
    for role in prof.roles:
        for j, arg in enumerate(role.command or []):
            result.errors += _placeholder_errors(arg, f"roles.{role.name}.command.{j}", None, prof, everyone)


RUN_WIDE = "run-wide"  # a test judged over the whole run (marker run_wide)


def suite_modules() -> list[ModuleType]:
    """Every module of the suite (importing them also registers their scenarios)."""
    modules = []
    for package in SUITE_PACKAGES:
        pkg = importlib.import_module(package)
        modules += [importlib.import_module(f"{package}.{i.name}") for i in pkgutil.iter_modules(pkg.__path__)]
    return modules


def direct_tests() -> dict[str, set[str]]:
    """Requirement -> packages ("cluster", "implementation") of tests marked with it; tests that are not fed by a
    scenario (e.g. the API checks) run as they are."""
    found: dict[str, set[str]] = {}
    for module in suite_modules():
        where = module.__name__.split(".")[2]
        for name, fn in vars(module).items():
            marks = getattr(fn, "pytestmark", []) if name.startswith("test") else []
            for mark in marks:
                if mark.name == "requirement":
                    for req in mark.args:
                        found.setdefault(req, set()).add(where)
                        if any(m.name == "run_wide" for m in marks):
                            found[req].add(RUN_WIDE)
    return found


def plan(prof: Profile | None) -> list[PlanRow]:
    """Per requirement: run, skip (why), not covered, or not applicable to the profile's binding model (not run,
    counted out of the verdict), for this profile (None: a cluster-only run)."""
    direct = direct_tests()
    registered = list(REGISTRY.values())
    rows: list[PlanRow] = []
    for req in SUITE_REQUIREMENTS:
        if prof is not None and (why := req.not_applicable(prof.binding_model)):
            rows.append(PlanRow(req.id, req.level, "not-applicable", why))
            continue
        covering = [s for s in registered if req.id in s.requirements]
        cluster = [s.name for s in covering if not s.implementation]
        runs, skips, fails = [], [], []
        for sc in (s for s in covering if s.implementation):
            gap = NO_PROFILE if prof is None else profile_gap(sc, prof, req.id)
            if gap:
                skips.append(f"{sc.name}: {gap}")
            elif prof is not None and sc.failure_reporting and not prof.promises.reports_failures:
                fails.append(f"{sc.name}{DECLARED_FAILS}")
            else:
                runs.append(sc.name)
        if cluster or (not covering and "cluster" in direct.get(req.id, ())):
            what = ", ".join(cluster) or (
                "every claim of the run, judged at its end" if RUN_WIDE in direct[req.id] else "tests of the API"
            )
            rows.append(PlanRow(req.id, req.level, "run", f"{what} (suite-owned objects: certifies the cluster)"))
        elif fails and not runs:
            rows.append(PlanRow(req.id, req.level, "fail", ", ".join(fails)))
        elif runs or fails or (not covering and prof is not None and req.id in direct):
            rows.append(PlanRow(req.id, req.level, "run", ", ".join(runs + fails) or "tests of the implementation"))
        elif skips or req.id in direct:
            rows.append(PlanRow(req.id, req.level, "skip", "; ".join(skips) or NO_PROFILE))
        else:
            rows.append(PlanRow(req.id, req.level, "not-covered", "no scenario checks it yet"))
    return rows


def _check_capabilities(prof: Profile, result: CheckResult) -> None:
    """A capability no scenario reads would be a promise nothing tests: refused (a typo of a real one, too)."""
    suite_modules()  # registers every scenario
    known = known_capabilities()
    for name in sorted(set(prof.capabilities) - known):
        result.errors.append(
            f"capabilities.{name}: no scenario reads it (a claim nothing tests); known: {', '.join(sorted(known))}"
        )


_PLANNED = {
    "run": "passed",
    "fail": "failed",
    "skip": "skipped",
    "not-covered": "not-covered",
    "not-applicable": NOT_APPLICABLE,
}


def predict(prof: Profile | None, rows: list[PlanRow]) -> list[str]:
    """The headline a run with this profile ends with if every requirement that runs passes (report/headline.py:
    its verdicts and exit status), and the MUSTs the plan leaves unshown, which make it partial."""
    summary: dict[str, dict[str, Any]] = {}
    for row in rows:
        req = CATALOGUE[row.requirement]
        summary[row.requirement] = {"level": row.level, "area": req.area, "outcome": _PLANNED[row.action]}
    none = NO_PROFILE if prof is None else None
    ended = conclude(summary, [], not_certified=none, model=prof.binding_model if prof else None)
    lines = [
        "a requirement that fails makes its verdict failure (exit 1); a cluster release with a known upstream defect "
        'reads failure for it, accepted or not (README "Verdicts and exit status")'
    ]
    unshown = [r for r in rows if r.level == "MUST" and r.action in ("skip", "not-covered")]
    if none is None and unshown:
        lines.append(f"the MUSTs that make it {ended.result} (not shown to pass: skipped or not covered):")
        lines += [f"  {r.requirement} {r.action}: {r.reason}" for r in unshown]
    declared = [r for r in rows if r.action == "fail"]
    if declared:
        lines.append("the requirements the profile's own declarations fail (judged, not skipped):")
        lines += [f"  {r.requirement} fail: {r.reason}" for r in declared]
    accept = " (--accept partial: exit 0)" if ended.exit_status == EXIT_PARTIAL else ""
    other = " other" if declared else ""
    lines.append(f"if every{other} requirement that runs passes, the run ends: {ended.headline}{accept}")
    return lines


def check(loaded: LoadedProfile) -> CheckResult:
    result = CheckResult()
    _check_files(loaded, result)
    _check_capabilities(loaded.profile, result)
    result.plan = plan(loaded.profile)
    result.verdict = predict(loaded.profile, result.plan)
    return result
