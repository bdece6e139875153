"""Build the real control plane (Kubernetes, etcd, kwok) from the Go module proxy, once, into the cache.

Each component is built from a small wrapper module in the cache (src/go.mod with tool directives), like
upstream builds its release binaries: static (CGO_ENABLED=0), -trimpath, stripped, with the version stamped.
A second call finds the binaries in the cache and does nothing.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from conformance.cluster.toolchain.cache import Cache, ComponentDir, default_cache_root
from conformance.cluster.toolchain.gobuild import BuildError, Progress, go_env, go_json, go_run, toolchain_choice
from conformance.cluster.toolchain.gomod import parse_gomod, staging_replacements, wrapper_gomod
from conformance.cluster.versions import KWOK_VERSION, KubeVersion

KUBE_COMMANDS = ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"]
KWOK_COMMANDS = ["kwok", "kwokctl"]


@dataclass(frozen=True)
class Binaries:
    """Paths of every binary a local cluster needs."""

    kube: dict[str, Path]
    etcd: Path
    kwok: Path
    kwokctl: Path
    etcd_version: str
    kwok_version: str

    @property
    def kubectl(self) -> Path:
        return self.kube["kubectl"]


@dataclass
class _Build:
    """One wrapper module and the binaries it yields."""

    name: str
    module: str
    version: str
    targets: dict[str, str]  # binary name -> main package
    replaces: dict[str, str] = field(default_factory=dict)
    go: str = "1.26"
    godebug: tuple[str, ...] = ()
    tags: str = ""
    ldflags: str = "-s -w"


def _print(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ensure_binaries(version: KubeVersion, cache: Cache | None = None, progress: Progress = _print) -> Binaries:
    """Return the cached binaries for `version`, building whatever is missing first.

    One build at a time per cache: runs started side by side (CI jobs, parallel test sessions) wait for the
    first one instead of compiling the same binaries twice into the same files.
    """
    cache = cache or Cache(default_cache_root())
    cache.root.mkdir(parents=True, exist_ok=True)
    with (cache.root / ".build.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if _complete(version, cache):  # the lock is held for another version; nothing of ours is built
                return _ensure_locked(version, cache, progress)
            progress(f"waiting for another build in {cache.root} to finish")
            fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_locked(version, cache, progress)


def _complete(version: KubeVersion, cache: Cache) -> bool:
    """Every binary of `version` is in the cache already (read without the lock: complete entries never change)."""
    kube_dir = cache.component("kubernetes", version.tag)
    if not kube_dir.has(KUBE_COMMANDS) or "etcd_version" not in kube_dir.record():
        return False
    etcd_dir = cache.component("etcd", kube_dir.record()["etcd_version"])
    return etcd_dir.has(["etcd"]) and cache.component("kwok", KWOK_VERSION).has(KWOK_COMMANDS)


def _ensure_locked(version: KubeVersion, cache: Cache, progress: Progress) -> Binaries:
    started = time.monotonic()
    kube_dir = cache.component("kubernetes", version.tag)
    built: list[str] = []
    if not kube_dir.has(KUBE_COMMANDS) or "etcd_version" not in kube_dir.record():
        built += _build_kubernetes(version, kube_dir, progress)
    etcd_version = kube_dir.record()["etcd_version"]
    etcd_dir = cache.component("etcd", etcd_version)
    if not etcd_dir.has(["etcd"]):
        built += _build(_etcd_build(etcd_version, kube_dir.record()["go"]), etcd_dir, progress)
    kwok_dir = cache.component("kwok", KWOK_VERSION)
    if not kwok_dir.has(KWOK_COMMANDS):
        built += _build(_kwok_build(kwok_dir, progress), kwok_dir, progress)
    if built:
        progress(f"built {', '.join(built)} in {time.monotonic() - started:.0f}s (cache: {cache.root})")
    return Binaries(
        kube={name: kube_dir.binary(name) for name in KUBE_COMMANDS},
        etcd=etcd_dir.binary("etcd"),
        kwok=kwok_dir.binary("kwok"),
        kwokctl=kwok_dir.binary("kwokctl"),
        etcd_version=etcd_version,
        kwok_version=KWOK_VERSION,
    )


def _download(module: str, version: str, workdir: Path, progress: Progress) -> dict:
    """Download a module; its go directive is read first, so the download runs with the toolchain it asks for.

    `go mod download` refuses a module whose go directive is newer than the running toolchain (GOTOOLCHAIN=local),
    whereas `go list -m` fetches only the module's go.mod and does not check it.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    listed = go_json(
        ["list", "-m", "-json", f"{module}@{version}"], workdir, go_env("1.0"), f"go.mod of {module}@{version}"
    )
    required = parse_gomod(Path(listed[0]["GoMod"]).read_text()).go
    env = go_env(required)
    progress(f"{module}@{version} asks for go {required} (its go.mod): {toolchain_choice(required, env)}")
    progress(f"fetching {module}@{version} from the Go module proxy")
    return go_json(
        ["mod", "download", "-json", f"{module}@{version}"], workdir, env, f"download of {module}@{version}"
    )[0]


def _build_kubernetes(
    version: KubeVersion, target: ComponentDir, progress: Progress, commands: list[str] = KUBE_COMMANDS
) -> list[str]:
    """`commands` of k8s.io/kubernetes (cmd/<name>) at `version`, stamped like a release build, into `target`."""
    info = _download("k8s.io/kubernetes", version.tag, target.src, progress)
    upstream = parse_gomod(Path(info["GoMod"]).read_text())
    replaces = staging_replacements(upstream, version.staging_tag)
    if not replaces:
        raise BuildError(f"k8s.io/kubernetes {version.tag}: found no staging modules in its go.mod")
    etcd_version = _expected_etcd(Path(info["Dir"]))
    stamp = {
        "gitVersion": version.tag,
        "gitMajor": str(version.major),
        "gitMinor": str(version.minor),
        "gitTreeState": "clean",
        "buildDate": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    ldflags = " ".join(
        f"-X '{pkg}.{key}={value}'"
        for key, value in stamp.items()
        for pkg in ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version")
    )
    build = _Build(
        name="kubernetes",
        module="k8s.io/kubernetes",
        version=version.tag,
        targets={name: f"k8s.io/kubernetes/cmd/{name}" for name in commands},
        replaces=replaces,
        go=upstream.go,
        godebug=upstream.godebug,
        # As hack/lib/golang.sh does for non-debug builds.
        tags="selinux,notest,grpcnotrace",
        ldflags=f"{ldflags} -s -w",
    )
    progress(
        f"k8s.io/kubernetes {version.tag}: {len(replaces)} staging modules replaced by "
        f"{version.staging_tag}; expects etcd {etcd_version}"
    )
    return _build(build, target, progress, extra={"etcd_version": etcd_version, "staging": sorted(replaces)})


def _expected_etcd(kubernetes_dir: Path) -> str:
    """The etcd version this Kubernetes release is tested with, from its build/dependencies.yaml."""
    deps = yaml.safe_load((kubernetes_dir / "build" / "dependencies.yaml").read_text())
    for dep in deps.get("dependencies", []):
        if dep.get("name") == "etcd":
            return "v" + str(dep["version"]).removeprefix("v")
    raise BuildError(f"{kubernetes_dir}/build/dependencies.yaml names no etcd version")


def _etcd_build(version: str, go: str) -> _Build:
    return _Build(
        name="etcd",
        module="go.etcd.io/etcd/server/v3",
        version=version,
        targets={"etcd": "go.etcd.io/etcd/server/v3"},
        go=go,
    )


def _kwok_build(target: ComponentDir, progress: Progress) -> _Build:
    info = _download("sigs.k8s.io/kwok", KWOK_VERSION, target.src, progress)
    upstream = parse_gomod(Path(info["GoMod"]).read_text())
    return _Build(
        name="kwok",
        module="sigs.k8s.io/kwok",
        version=KWOK_VERSION,
        targets={name: f"sigs.k8s.io/kwok/cmd/{name}" for name in KWOK_COMMANDS},
        go=upstream.go,
        ldflags=f"-X 'sigs.k8s.io/kwok/pkg/consts.Version={KWOK_VERSION.removeprefix('v')}' -s -w",
    )


def _build(build: _Build, target: ComponentDir, progress: Progress, extra: dict | None = None) -> list[str]:
    """Write the wrapper module, resolve it, and build each missing binary (atomically into bin/)."""
    env = go_env(build.go)
    target.src.mkdir(parents=True, exist_ok=True)
    target.bin.mkdir(parents=True, exist_ok=True)
    (target.src / "go.mod").write_text(
        wrapper_gomod(
            module=f"dra-conformance.local/build/{build.name}",
            go=build.go,
            requires={build.module: build.version},
            tools=list(build.targets.values()),
            replaces=build.replaces,
            godebug=build.godebug,
        )
    )
    progress(f"{build.name} {build.version}: resolving modules (go {build.go}: {toolchain_choice(build.go, env)})")
    go_run(["mod", "tidy"], target.src, env, f"{build.name}: go mod tidy", progress)
    record = dict(
        target.record(), **(extra or {}), go=build.go, toolchain=env["GOTOOLCHAIN"], version=build.version, binaries={}
    )
    built = []
    for name, package in build.targets.items():
        out = target.binary(name)
        if out.exists():
            record["binaries"][name] = target.record().get("binaries", {}).get(name, {})
            continue
        progress(f"building {name} {build.version} ...")
        tmp = out.with_name(f".{name}.partial")
        args = ["build", "-v", "-trimpath", "-ldflags", build.ldflags, "-o", str(tmp), package]
        if build.tags:
            args[3:3] = ["-tags", build.tags]
        seconds = go_run(args, target.src, env, name, progress)
        tmp.replace(out)
        size = out.stat().st_size
        record["binaries"][name] = {"seconds": round(seconds, 1), "bytes": size}
        progress(f"built {name} in {seconds:.0f}s ({size / 2**20:.0f} MiB)")
        built.append(name)
    target.save_record(record)
    return built
