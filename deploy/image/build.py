"""Build the gitfleet image: four cached stages, then the assembly (see the package docstring).

Each stage's output lives in `<cache>/image/<stage>-<key>/`, the key hashing everything the
stage reads: its recipe (this package's own source), the previous stage's key, and its inputs
(the Debian package list and apt sources; the wheel lock; the helm and kubectl binaries; the
source tree). A stage whose key is unchanged is reused; a build that changes only gitfleet's
code redoes only the `app` layer and the assembly. `verify` then builds every stage again in
an empty cache from the same inputs (the downloaded wheels are inputs too) and compares the
digests: the check that the build is reproducible.

SOURCE_DATE_EPOCH (the environment's, else the last commit touching the sources) is every
layer entry's modification time and the image's creation time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from deploy.image import debian, oci, python, source, tools
from deploy.image.errors import ImageBuildError
from deploy.image.layers import snapshot, write_layer

REPO_ROOT = Path(__file__).resolve().parents[2]
RECIPE = Path(__file__).parent
ARCHIVE = "gitfleet-image.tar"


@dataclass(frozen=True)
class Image:
    """A built image: where it is and what it is."""

    digest: str  # the manifest's sha256 digest
    reference: str  # gitfleet:<version>
    layout: Path  # OCI layout folder (tag = version)
    archive: Path  # docker-load-able tarball
    size: int  # bytes of all blobs (compressed)
    seconds: float
    reused: bool  # True when nothing had to be rebuilt

    @property
    def tag(self) -> str:
        return self.reference.split(":", 1)[1]


def cache_root() -> Path:
    return Path(os.environ.get("GITFLEET_CACHE_DIR", REPO_ROOT / ".cache")) / "image"


def key_of(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:16]


def recipe_key() -> str:
    """Changes whenever this package's code (how the image is made) changes."""
    texts = [p.read_text() for p in sorted(RECIPE.glob("*.py"))]
    return key_of(*texts)


def require_root() -> None:
    if os.geteuid() != 0:
        raise ImageBuildError(
            "building the image runs mmdebstrap and chroot, which need root: run it as root "
            "(sudo make image)"
        )
    for tool in ("mmdebstrap", "umoci", "dpkg-deb", "git"):
        if not shutil.which(tool):
            raise ImageBuildError(f"{tool} not found: `make apt` installs the build tools")


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """One build at a time per cache: a second waits, then reuses what the first built. The
    holder removes the scratch folders of builds that were killed before they cleaned up."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for leftover in folder.glob("inputs-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        yield


@dataclass(frozen=True)
class Inputs:
    """Everything a build reads, taken once: a copy of the source files (so an edit made
    while the build runs cannot mix two versions of the tree), SOURCE_DATE_EPOCH, the
    requirements with the virtualenv's versions as constraints, and the pinned binaries."""

    tree: Path
    paths: list[str]
    epoch: int
    version: str
    requirements: list[str]
    pinned: str
    binaries: dict[str, Path]


def gather(scratch: Path) -> Inputs:
    paths = source.files(REPO_ROOT)
    tree = scratch / "src"
    source.copy(REPO_ROOT, paths, tree)
    env_epoch = os.environ.get("SOURCE_DATE_EPOCH")
    pyproject = tree / "pyproject.toml"
    return Inputs(
        tree=tree,
        paths=paths,
        epoch=int(env_epoch) if env_epoch else source.source_date_epoch(REPO_ROOT),
        version=tomllib.loads(pyproject.read_text())["project"]["version"],
        requirements=python.runtime_requirements(pyproject),
        pinned=python.constraints(),
        binaries=tools.binaries(),
    )


def build_image(out: Path) -> Image:
    """Build (or reuse) the image and copy its OCI layout and tarball into `out`."""
    require_root()
    started = time.monotonic()
    cache = cache_root()
    with locked(cache), tempfile.TemporaryDirectory(dir=cache, prefix="inputs-") as scratch:
        inputs = gather(Path(scratch))
        return _publish(build_stages(cache, cache, inputs), out, started)


def verify(out: Path, inputs: Inputs | None = None) -> tuple[Image, Image]:
    """Build (or reuse) the image into `out`, then build it again from the same inputs (those
    given, else gathered now) in an empty cache into `out`/verify: equal digests mean the build
    is reproducible."""
    require_root()
    started = time.monotonic()
    cache = cache_root()
    with locked(cache), tempfile.TemporaryDirectory(dir=cache, prefix="inputs-") as scratch:
        inputs = inputs or gather(Path(scratch))
        first = _publish(build_stages(cache, cache, inputs), out, started)
        again_started = time.monotonic()
        fresh = Path(scratch) / "fresh"
        fresh.mkdir()
        second = _publish(build_stages(fresh, cache, inputs), out / "verify", again_started)
        return first, second


def _publish(built: tuple[Path, bool], out: Path, started: float) -> Image:
    folder, reused = built
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "oci", ignore_errors=True)
    shutil.copytree(folder / "oci", out / "oci")
    for blob in (out / "oci").rglob("*"):
        blob.chmod(0o755 if blob.is_dir() else 0o644)
    shutil.copyfile(folder / ARCHIVE, out / ARCHIVE)
    meta = json.loads((folder / "image.json").read_text())
    (out / "gitfleet-image.digest").write_text(meta["digest"] + "\n")
    return Image(
        digest=meta["digest"],
        reference=meta["reference"],
        layout=out / "oci",
        archive=out / ARCHIVE,
        size=oci.image_size(out / "oci"),
        seconds=time.monotonic() - started,
        reused=reused,
    )


class Stages:
    """The stages of one build, writing into `cache` (wheels are read from `wheel_cache`)."""

    def __init__(self, cache: Path, wheel_cache: Path, inputs: Inputs) -> None:
        self.cache, self.wheel_cache, self.inputs = cache, wheel_cache, inputs
        self.epoch = inputs.epoch
        self.built_any = False
        self.recipe = recipe_key()
        self.python_identity = ""

    def stage(self, name: str, key: str, make: Callable[[Path], None]) -> Path:
        """The folder of stage `name` at `key`: reused when complete, else made by `make`."""
        folder = self.cache / f"{name}-{key}"
        if (folder / ".complete").exists():
            return folder
        print(f"image: building stage {name} ({folder.name}) ...", flush=True)
        self.built_any = True
        for old in self.cache.glob(f"{name}-*"):
            shutil.rmtree(old, ignore_errors=True)
        folder.mkdir(parents=True)
        make(folder)
        (folder / ".complete").write_text(key)
        return folder

    def debian(self) -> tuple[Path, str]:
        sources = debian.debian_sources()
        parts = (self.recipe, sources, ",".join(debian.PACKAGES), debian.mmdebstrap_version())
        self.python_identity = key_of(*parts)  # which Python the wheels are resolved for
        key = key_of(self.python_identity, str(self.epoch))

        def make(folder: Path) -> None:
            log = folder / "build.log"
            rootfs = folder / "rootfs"
            debian.create(rootfs, sources=sources, epoch=self.epoch, debs=folder / "debs", log=log)
            debian.finish(rootfs, debs=folder / "debs", log=log)
            write_layer(rootfs, snapshot(rootfs), folder / "layer.tar", mtime=self.epoch)

        return self.stage("debian", key, make), key

    def wheels(self, base: Path) -> Path:
        """The wheels, resolved by the image's Python: kept in the shared cache (an input)."""
        requirements, pinned = self.inputs.requirements, self.inputs.pinned
        parts = (*requirements, pinned, python.pip_pin(), python.SETUPTOOLS)
        key = key_of(self.python_identity, *parts)
        folder = self.wheel_cache / f"wheels-{key}"
        if not (folder / ".complete").exists():
            print("image: downloading the Python wheels ...", flush=True)
            self.built_any = True
            for old in self.wheel_cache.glob("wheels-*"):
                shutil.rmtree(old, ignore_errors=True)
            log = self.wheel_cache / "wheels.log"
            log.unlink(missing_ok=True)
            root = base / "rootfs"
            python.download(folder, root=root, requirements=requirements, pinned=pinned, log=log)
            (folder / ".complete").write_text(key)
        return folder

    def python(self, base: Path, base_key: str, wheels: Path) -> tuple[Path, str]:
        locked_text = python.lock(wheels)
        key = key_of(self.recipe, base_key, locked_text)

        def make(folder: Path) -> None:
            rootfs = folder / "rootfs"
            shutil.copytree(base / "rootfs", rootfs, symlinks=True)
            before = snapshot(rootfs)
            log = folder / "build.log"
            python.install_dependencies(rootfs, wheels, locked=locked_text, log=log)
            (folder / "requirements.lock").write_text(locked_text)
            added = snapshot(rootfs) - before
            write_layer(rootfs, added, folder / "layer.tar", mtime=self.epoch)

        return self.stage("python", key, make), key

    def tools(self) -> Path:
        found = self.inputs.binaries
        key = key_of(self.recipe, tools.fingerprint(found), str(self.epoch))

        def make(folder: Path) -> None:
            staged = folder / "root"
            added = tools.stage(staged, found)
            write_layer(staged, added, folder / "layer.tar", mtime=self.epoch)
            shutil.rmtree(staged)

        return self.stage("tools", key, make)

    def app(self, deps: Path, deps_key: str, wheels: Path) -> Path:
        tree, paths = self.inputs.tree, self.inputs.paths
        key = key_of(self.recipe, deps_key, source.fingerprint(tree, paths))

        def make(folder: Path) -> None:
            rootfs = folder / "rootfs"
            shutil.copytree(deps / "rootfs", rootfs, symlinks=True)
            before = snapshot(rootfs)
            log = folder / "build.log"
            packages = source.packages(tree)
            python.install_source(rootfs, tree, wheels, packages=packages, log=log)
            write_layer(rootfs, snapshot(rootfs) - before, folder / "layer.tar", mtime=self.epoch)
            shutil.rmtree(rootfs)

        return self.stage("app", key, make)

    def assemble(self, layers: list[oci.Layer]) -> Path:
        version = self.inputs.version
        config = oci.ImageConfig(
            version=version, epoch=self.epoch, labels=labels(version, self.epoch)
        )
        layer_keys = [f"{ly.name}={ly.tar.parent.name}" for ly in layers]
        key = key_of(self.recipe, *layer_keys, json.dumps(config.labels, sort_keys=True))

        def make(folder: Path) -> None:
            digest = oci.assemble(folder / "oci", layers, config)
            oci.write_archive(
                folder / "oci", folder / ARCHIVE, reference=config.reference, epoch=self.epoch
            )
            meta = {"digest": digest, "reference": config.reference}
            (folder / "image.json").write_text(json.dumps(meta))

        return self.stage("oci", key, make)


def labels(version: str, epoch: int) -> dict[str, str]:
    """The OCI annotation keys a registry or scanner shows (no base image: there is none)."""
    created = oci.ImageConfig(version=version, epoch=epoch).created
    return {
        "org.opencontainers.image.title": "gitfleet",
        "org.opencontainers.image.description": "GitOps control plane for fleets of clusters",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.created": created,
    }


def build_stages(cache: Path, wheel_cache: Path, inputs: Inputs) -> tuple[Path, bool]:
    """Run the stages in order; return the assembly's folder and whether all was reused."""
    stages = Stages(cache, wheel_cache, inputs)
    base, base_key = stages.debian()
    wheels = stages.wheels(base)
    deps, deps_key = stages.python(base, base_key, wheels)
    binaries = stages.tools()
    app = stages.app(deps, deps_key, wheels)
    layers = [
        oci.Layer("debian", base / "layer.tar"),
        oci.Layer("tools", binaries / "layer.tar"),
        oci.Layer("python", deps / "layer.tar"),
        oci.Layer("app", app / "layer.tar"),
    ]
    folder = stages.assemble(layers)
    return folder, not stages.built_any
