"""Build the real control plane (Kubernetes, etcd, kwok) from the Go module proxy, once, into the cache.

Each component is built from a small wrapper module in the cache (src/go.mod with tool directives), like
upstream builds its release binaries: static (CGO_ENABLED=0), -trimpath, stripped, with the version stamped.
A second call finds the binaries in the cache and does nothing. Kubernetes itself is built from the source that
K8S_PATCHES / K8S_SOURCE name (toolchain.source), in a cache entry of its own when that is not the release as published.
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
from conformance.cluster.toolchain.patched import prepare_tree
from conformance.cluster.toolchain.source import KubeSource, source_from_env
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
    # What the Kubernetes binaries were built from (release, patches and their hashes); None: not said.
    source: KubeSource | None = None

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


def ensure_binaries(
    version: KubeVersion, cache: Cache | None = None, progress: Progress = _print, source: KubeSource | None = None
) -> Binaries:
    """Return the cached binaries for `version`, building whatever is missing first.

    `source` (default: what K8S_PATCHES / K8S_SOURCE name, else the release as published) decides what Kubernetes
    is built from. One build at a time per cache: runs started side by side (CI jobs, parallel test sessions) wait
    for the first one instead of compiling the same binaries twice into the same files.
    """
    source = source or source_from_env(version.tag)
    cache = cache or Cache(default_cache_root())
    cache.root.mkdir(parents=True, exist_ok=True)
    with (cache.root / ".build.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if _complete(source, cache):  # the lock is held for another version; nothing of ours is built
                return _ensure_locked(version, cache, progress, source)
            progress(f"waiting for another build in {cache.root} to finish")
            fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_locked(version, cache, progress, source)


def is_cached(version: KubeVersion, cache: Cache | None = None) -> bool:
    """Every binary of `version` (as K8S_PATCHES / K8S_SOURCE say it is built) is in the cache: what may run without a
    build (`make review`, `dra-conformance lifecycle` never start one)."""
    return _complete(source_from_env(version.tag), cache or Cache(default_cache_root()))


def _complete(source: KubeSource, cache: Cache) -> bool:
    """Every binary of `source` is in the cache already (read without the lock: complete entries never change)."""
    kube_dir = cache.component("kubernetes", source.key)
    if not kube_dir.has(KUBE_COMMANDS) or "etcd_version" not in kube_dir.record():
        return False
    etcd_dir = cache.component("etcd", kube_dir.record()["etcd_version"])
    return etcd_dir.has(["etcd"]) and cache.component("kwok", KWOK_VERSION).has(KWOK_COMMANDS)


def _ensure_locked(version: KubeVersion, cache: Cache, progress: Progress, source: KubeSource) -> Binaries:
    started = time.monotonic()
    kube_dir = cache.component("kubernetes", source.key)
    built: list[str] = []
    if source.patched:
        progress(f"Kubernetes {source.describe()} (cache entry {kube_dir.root.name})")
    if not kube_dir.has(KUBE_COMMANDS) or "etcd_version" not in kube_dir.record():
        built += _build_kubernetes(version, kube_dir, progress, source=source)
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
        source=source,
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
    version: KubeVersion,
    target: ComponentDir,
    progress: Progress,
    commands: list[str] = KUBE_COMMANDS,
    source: KubeSource | None = None,
) -> list[str]:
    """`commands` of k8s.io/kubernetes (cmd/<name>) at `version`, stamped like a release build, into `target`;
    from `source` where given (the modules replaced by a patched copy, or by a checkout)."""
    source = source or KubeSource(version.tag)
    if source.checkout is not None:
        info = {"Dir": str(source.checkout), "GoMod": str(source.checkout / "go.mod")}
        upstream = parse_gomod(Path(info["GoMod"]).read_text())
        replaces = {
            path: str(source.checkout / where)
            for path, where in upstream.replace.items()
            if where.startswith("./staging/") and path in upstream.require
        }
    else:
        info = _download("k8s.io/kubernetes", version.tag, target.src, progress)
        upstream = parse_gomod(Path(info["GoMod"]).read_text())
        replaces = staging_replacements(upstream, version.staging_tag)
    if not replaces:
        raise BuildError(f"k8s.io/kubernetes {version.tag}: found no staging modules in its go.mod")
    etcd_version = _expected_etcd(Path(info["Dir"]))
    patched: list[str] = []
    if source.patches:
        copies, patched = prepare_tree(
            source, Path(info["Dir"]), lambda module: _staging_dir(module, version, target.src), target.root / "patched"
        )
        replaces.update(copies)
        progress(f"k8s.io/kubernetes {version.tag}: {len(source.patches)} patches change {len(patched)} files")
    if source.checkout is not None:
        replaces["k8s.io/kubernetes"] = str(source.checkout)
    stamp = {
        "gitVersion": version.tag,
        "gitMajor": str(version.major),
        "gitMinor": str(version.minor),
        # A patched build says so in every component's /version: not the release's tree, and which source instead.
        "gitTreeState": "dirty" if source.patched else "clean",
        **({"gitCommit": source.digest[:40]} if source.patched else {}),
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
    staging = sorted(path for path in replaces if path != "k8s.io/kubernetes")
    extra = {"etcd_version": etcd_version, "staging": staging, "source": source.as_dict()}
    if patched:
        extra["patched_files"] = patched
    return _build(build, target, progress, extra=extra)


def _staging_dir(module: str, version: KubeVersion, workdir: Path) -> Path:
    """Where the published staging module (k8s.io/api, ...) that a build of `version` uses is in the module cache."""
    return Path(_download(module, version.staging_tag, workdir, lambda _message: None)["Dir"])


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
