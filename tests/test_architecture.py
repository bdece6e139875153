"""The structure docs/architecture.md describes, kept true: imports between conformance's packages point one way (down
the layers below), no module imports one that imports it back (directly or through others, type-only imports
included), and every repository path the page names exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
# Top to bottom: a package may import only packages of a lower layer (a larger number) or its own.
LAYERS = {
    "plugin": 0,
    "cli": 0,
    "session": 1,
    "docs": 1,
    "matrix": 1,
    "scale": 1,
    "lifecycle": 1,
    "suite": 2,
    "report": 3,
    "observe": 4,
    "implementation": 5,
    "cluster": 6,
}
PATH_ROOTS = ("conformance/", "fake-drivers/", "fixtures/", "docs/", "tests/")
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    modules = {}
    for path in (ROOT / "conformance").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of other conformance modules (`from a.b import c` counts as a.b.c where c is a module)."""
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("conformance"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    found.add(sub if sub in modules else str(node.module))
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("conformance"))
        edges[name] = {m for m in found if m in modules and m != name}
    return edges


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_imports_between_packages_point_down() -> None:
    edges = _imports(_modules())
    upward = sorted(
        f"{a} -> {b}"
        for a, targets in edges.items()
        for b in targets
        if _package(a) in LAYERS
        and _package(b) in LAYERS
        and _package(a) != _package(b)
        and LAYERS[_package(a)] >= LAYERS[_package(b)]
    )
    why = "imports that point up or sideways between packages (docs/architecture.md Layout):\n"
    assert not upward, why + "\n".join(upward)
    assert {_package(m) for m in edges} - {"conformance"} <= set(LAYERS), "a new package: give it a layer here"


def test_no_import_circle() -> None:
    assert not _cycles(_imports(_modules()))


def test_no_module_over_500_lines() -> None:
    sources = [*(ROOT / "conformance").rglob("*.py"), *(ROOT / "fake-drivers").rglob("*.py")]
    long = sorted(f"{p.relative_to(ROOT)}: {n}" for p in sources if (n := len(p.read_text().splitlines())) > MAX_LINES)
    assert not long, "split these by job (issue 35):\n" + "\n".join(long)


def test_every_path_the_page_names_exists() -> None:
    named = {
        m.group(1).rstrip(".,:")
        for m in re.finditer(r"`([^`\s]+)`", PAGE.read_text())
        if m.group(1).startswith(PATH_ROOTS)
    }
    assert len(named) > 20, "the page should name the places to change"
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"
