"""Build the testbed's binaries from pinned Go modules, once per pin set.

Each folder under `gomod/` is a Go module whose go.mod and go.sum pin one tool (Kubernetes
components, kwok, helm, sops and age) through `tool` directives. A module's binaries land in
`<cache>/testbed/<module>-<key>/`, where the key hashes the module's go.mod, go.sum, the link
flags and the Go version: a rebuild happens only when a pin changes. `tools/` holds symlinks to
the current binaries so that one folder can go on PATH or into GITFLEET_TOOLS_DIR.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from deploy.testbed.errors import BuildError

GOMOD_DIR = Path(__file__).parent / "gomod"
REPO_ROOT = Path(__file__).resolve().parents[2]
KUBERNETES_VERSION = "v1.35.4"
KWOK_VERSION = "v0.8.0"


@dataclass(frozen=True)
class GoModule:
    """One pinned Go module and the binaries built from it."""

    name: str
    packages: tuple[str, ...]
    ldflags: str = "-s -w"
    names: tuple[str, ...] = ()  # binary names when a package path does not end in one

    @property
    def folder(self) -> Path:
        return GOMOD_DIR / self.name

    def binaries(self) -> tuple[str, ...]:
        return self.names or tuple(p.rsplit("/", 1)[1] for p in self.packages)


def _k8s_ldflags() -> str:
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    values = {"gitVersion": KUBERNETES_VERSION, "gitMajor": major, "gitMinor": minor}
    values["gitTreeState"] = "clean"
    sets = [
        f"-X {pkg}.{key}={value}"
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for key, value in values.items()
    ]
    return " ".join(["-s -w", *sets])


MODULES = (
    GoModule(
        "kubernetes",
        tuple(
            f"k8s.io/kubernetes/cmd/{c}"
            for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
        ),
        _k8s_ldflags(),
    ),
    GoModule("kwok", ("sigs.k8s.io/kwok/cmd/kwok",)),
    GoModule("helm", ("helm.sh/helm/v3/cmd/helm",)),
    GoModule("etcd", ("go.etcd.io/etcd/server/v3",), names=("etcd",)),
    # sops decrypts SOPS-encrypted manifests at render time; age and age-keygen make keys
    GoModule(
        "sops",
        (
            "github.com/getsops/sops/v3/cmd/sops",
            "filippo.io/age/cmd/age",
            "filippo.io/age/cmd/age-keygen",
        ),
    ),
)


def cache_root() -> Path:
    return Path(os.environ.get("GITFLEET_CACHE_DIR", REPO_ROOT / ".cache")) / "testbed"


def tools_dir() -> Path:
    """The folder with a symlink to every testbed binary (put it on PATH)."""
    return cache_root() / "tools"


def go_binary() -> str:
    found = shutil.which("go")
    if not found:
        raise BuildError(
            "no Go toolchain found: the testbed builds Kubernetes from Go modules. "
            "Install Go 1.25 or newer and put `go` on PATH"
        )
    return found


def go_version() -> str:
    result = subprocess.run([go_binary(), "env", "GOVERSION"], capture_output=True, text=True)
    return result.stdout.strip()


def module_key(module: GoModule, go: str) -> str:
    digest = hashlib.sha256()
    for part in ("go.mod", "go.sum"):
        digest.update((module.folder / part).read_bytes())
    digest.update(module.ldflags.encode())
    digest.update(go.encode())
    return digest.hexdigest()[:16]


def module_output(module: GoModule, go: str) -> Path:
    return cache_root() / f"{module.name}-{module_key(module, go)}"


def is_built(module: GoModule, out: Path) -> bool:
    return (out / ".complete").exists() and all((out / b).exists() for b in module.binaries())


def build_module(module: GoModule, out: Path, *, log: Path) -> None:
    """Compile the module's packages into `out`; on failure raise BuildError naming the log."""
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    target = str(tmp / module.names[0]) if module.names else f"{tmp}/"
    cmd = [go_binary(), "build", "-trimpath", f"-ldflags={module.ldflags}", "-o", target]
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false"}
    with log.open("wb") as sink:
        done = subprocess.run(
            [*cmd, *module.packages], cwd=module.folder, stdout=sink, stderr=sink, env=env
        )
    if done.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        raise BuildError(
            f"building {module.name} failed (exit {done.returncode}); full log: {log}\n"
            + "\n".join(tail)
        )
    (tmp / ".complete").write_text(module_key(module, go_version()))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def link_tools(outputs: dict[str, Path]) -> None:
    folder = tools_dir()
    folder.mkdir(parents=True, exist_ok=True)
    for name, path in outputs.items():
        link = folder / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(path)


def ensure_binaries(*, announce: bool = True) -> dict[str, Path]:
    """Build what is missing and return {binary name: path}, plus kwok's stage file.

    A lock file serialises builds: two processes (a demo and a test run) that both find a
    module missing would otherwise compile into the same `.partial` folder and rename it from
    under each other. The second waits, then finds the module built.
    """
    cache_root().mkdir(parents=True, exist_ok=True)
    with (cache_root() / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_binaries(announce=announce)


def _ensure_binaries(*, announce: bool) -> dict[str, Path]:
    go = go_version()
    outputs: dict[str, Path] = {}
    for module in MODULES:
        out = module_output(module, go)
        if not is_built(module, out):
            log = cache_root() / f"build-{module.name}.log"
            if announce:
                print(f"building {module.name} from pinned Go modules (log: {log}) ...", flush=True)
            build_module(module, out, log=log)
        outputs.update({b: out / b for b in module.binaries()})
    outputs["kwok-stages.yaml"] = write_kwok_stages(go)
    link_tools(outputs)
    return outputs


KWOK_STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
)


def write_kwok_stages(go: str) -> Path:
    """Assemble kwok's stage configuration from the pinned kwok module's own stage files."""
    target = cache_root() / f"kwok-stages-{KWOK_VERSION}.yaml"
    if target.exists():
        return target
    found = subprocess.run(
        [go_binary(), "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
        cwd=GOMOD_DIR / "kwok",
        capture_output=True,
        text=True,
    )
    if found.returncode != 0 or not found.stdout.strip():
        raise BuildError(f"cannot locate the kwok module source: {found.stderr.strip()}")
    stage_dir = Path(found.stdout.strip()) / "kustomize" / "stage"
    docs = [(stage_dir / rel).read_text() for rel in KWOK_STAGES]
    target.write_text("\n---\n".join(d.strip() for d in docs) + "\n")
    return target
