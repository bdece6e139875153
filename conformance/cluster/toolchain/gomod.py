"""Read upstream go.mod files and write the wrapper modules that build upstream commands.

k8s.io/kubernetes cannot be built as a dependency as it is: its go.mod requires the staging modules
(k8s.io/api, k8s.io/client-go, ...) at v0.0.0 and replaces them with ./staging paths, which only work inside
its own repository. A wrapper module requires k8s.io/kubernetes and replaces each staging module with its
published v0.<minor>.<patch>. The list is derived from the upstream go.mod, never written by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BLOCK_RE = re.compile(r"^(require|replace|tool)\s*\(\s*$")
_GO_RE = re.compile(r"^go\s+(\d+\.\d+(?:\.\d+)?)\s*$")
_GODEBUG_RE = re.compile(r"^godebug\s+(.+)$")


@dataclass(frozen=True)
class GoMod:
    """The parts of a go.mod file the wrapper needs."""

    module: str
    go: str
    godebug: tuple[str, ...]
    require: dict[str, str]
    # module path -> replacement target as written ("./staging/src/k8s.io/api" or "mod version").
    replace: dict[str, str]


def parse_gomod(text: str) -> GoMod:
    """Parse the subset of go.mod syntax that upstream Kubernetes, etcd and kwok use."""
    module, go = "", ""
    godebug: list[str] = []
    require: dict[str, str] = {}
    replace: dict[str, str] = {}
    block: str | None = None
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if block:
            if line == ")":
                block = None
            else:
                _add_directive(block, line, require, replace)
            continue
        if match := _BLOCK_RE.match(line):
            block = match[1]
        elif line.startswith("module "):
            module = line.split()[1]
        elif match := _GO_RE.match(line):
            go = match[1]
        elif match := _GODEBUG_RE.match(line):
            godebug.append(match[1].strip())
        elif line.startswith(("require ", "replace ")):
            keyword, rest = line.split(None, 1)
            _add_directive(keyword, rest, require, replace)
    if not module or not go:
        raise ValueError("go.mod has no module or go directive")
    return GoMod(module, go, tuple(godebug), require, replace)


def _add_directive(kind: str, line: str, require: dict[str, str], replace: dict[str, str]) -> None:
    if kind == "require":
        path, version = line.split()[:2]
        require[path] = version
    elif kind == "replace":
        left, right = (side.strip() for side in line.split("=>", 1))
        replace[left.split()[0]] = right


def staging_replacements(upstream: GoMod, staging_version: str) -> dict[str, str]:
    """Map every staging module the upstream module requires to its published version.

    A staging module is one replaced by a local ./staging path. Those listed only in the replace block
    (sample-controller, sample-cli-plugin: not published, not required) cannot be needed by the build.
    """
    staged = {path for path, target in upstream.replace.items() if target.startswith("./staging/")}
    return {path: staging_version for path in sorted(staged) if path in upstream.require}


def wrapper_gomod(
    module: str,
    go: str,
    requires: dict[str, str],
    tools: list[str],
    replaces: dict[str, str] | None = None,  # module -> version, or -> a folder
    godebug: tuple[str, ...] = (),
) -> str:
    """Render a wrapper go.mod that builds `tools` (Go 1.24+ tool directives keep them through tidy)."""
    lines = [f"module {module}", "", f"go {go}", ""]
    lines += [f"godebug {entry}" for entry in godebug]
    lines += ["", "require ("] + [f"\t{path} {version}" for path, version in requires.items()] + [")"]
    if replaces:
        lines += ["", "replace ("] + [f"\t{path} => {_target(path, to)}" for path, to in replaces.items()] + [")"]
    lines += ["", "tool ("] + [f"\t{tool}" for tool in tools] + [")", ""]
    return "\n".join(lines)


def _target(path: str, to: str) -> str:
    """A replacement: a folder (a checkout's module) as it is, else the same module at version `to`."""
    return to if to.startswith(("/", "./", "../")) else f"{path} {to}"


def version_tuple(go_version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in go_version.split("."))
