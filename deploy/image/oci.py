"""Assembling the layers into an OCI image with umoci, and a `docker load`-able tarball.

`umoci raw add-layer` takes our layer tars verbatim (umoci only compresses them); every
timestamp umoci would take from the clock (the config's `created`, each history entry) is set
to SOURCE_DATE_EPOCH, so the manifest digest depends on the layers and the config only.

The tarball holds the same OCI layout plus the `manifest.json` that `docker load` reads (the
layout `docker save` writes since Docker 25: an OCI layout with Docker's manifest beside it);
its entries are sorted and carry one modification time too.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from deploy.image.debian import UID, USER
from deploy.image.errors import ImageBuildError

NAME = "gitfleet"
ENTRYPOINT = ("/usr/bin/tini", "--", "/usr/local/bin/gitfleet")
CMD = ("api", "--host", "0.0.0.0", "--port", "8080")
ENV = (
    "PATH=/usr/local/bin:/usr/bin:/bin",
    f"HOME=/home/{USER}",
    "LANG=C.UTF-8",
    "PYTHONDONTWRITEBYTECODE=1",
    "PYTHONUNBUFFERED=1",
    "GITFLEET_CACHE_DIR=/var/cache/gitfleet",
    "TINI_SUBREAPER=1",
)


@dataclass(frozen=True)
class Layer:
    name: str  # the stage that made it: debian, tools, python, app
    tar: Path


@dataclass(frozen=True)
class ImageConfig:
    """What a runtime reads from the image: who runs what, where, with which environment."""

    version: str
    epoch: int
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def created(self) -> str:
        moment = datetime.datetime.fromtimestamp(self.epoch, tz=datetime.UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def reference(self) -> str:
        return f"{NAME}:{self.version}"


def umoci(*args: str) -> None:
    done = subprocess.run(["umoci", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise ImageBuildError(f"umoci {args[0]} failed: {done.stderr.strip()}")


def assemble(layout: Path, layers: list[Layer], config: ImageConfig) -> str:
    """Write the OCI layout `layout` (tag = the version) and return the manifest digest."""
    shutil.rmtree(layout, ignore_errors=True)
    image = f"{layout}:{config.version}"
    umoci("init", "--layout", str(layout))
    umoci("new", "--image", image)
    for layer in layers:
        history = ["--history.created", config.created, "--history.created_by", layer.name]
        umoci("raw", "add-layer", "--image", image, *history, str(layer.tar))
    umoci("config", "--image", image, *_config_args(config))
    umoci("gc", "--layout", str(layout))
    return manifest_digest(layout)


def _config_args(config: ImageConfig) -> list[str]:
    args = ["--created", config.created, "--author", NAME, "--no-history"]
    args += ["--architecture", "amd64", "--os", "linux"]
    args += ["--config.user", f"{UID}:{UID}", "--config.workingdir", f"/home/{USER}"]
    args += ["--config.exposedports", "8080/tcp", "--config.stopsignal", "SIGTERM"]
    for part in ENTRYPOINT:
        args += ["--config.entrypoint", part]
    for part in CMD:
        args += ["--config.cmd", part]
    for pair in ENV:
        args += ["--config.env", pair]
    for key, value in sorted(config.labels.items()):
        args += ["--config.label", f"{key}={value}"]
    return args


def manifest_digest(layout: Path) -> str:
    index = json.loads((layout / "index.json").read_text())
    digest: str = index["manifests"][0]["digest"]
    return digest


def blob(layout: Path, digest: str) -> Path:
    return layout / "blobs" / digest.replace(":", "/", 1)


def image_size(layout: Path) -> int:
    """Bytes of every blob: what a registry stores and a node pulls (compressed layers)."""
    return sum(p.stat().st_size for p in (layout / "blobs").rglob("*") if p.is_file())


def write_archive(layout: Path, out: Path, *, reference: str, epoch: int) -> None:
    """The OCI layout plus docker's manifest.json, as one tar with sorted entries."""
    manifest = json.loads(blob(layout, manifest_digest(layout)).read_text())
    docker = [
        {
            "Config": f"blobs/{manifest['config']['digest'].replace(':', '/', 1)}",
            "RepoTags": [reference],
            "Layers": [f"blobs/{ly['digest'].replace(':', '/', 1)}" for ly in manifest["layers"]],
        }
    ]
    tmp = out.with_name(out.name + ".partial")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(layout.rglob("*"), key=lambda p: p.relative_to(layout).parts):
            _add(tar, path, path.relative_to(layout).as_posix(), epoch)
        _add_bytes(tar, "manifest.json", json.dumps(docker).encode(), epoch)
    os.replace(tmp, out)


def _add(tar: tarfile.TarFile, path: Path, name: str, epoch: int) -> None:
    entry = tarfile.TarInfo(name)
    entry.mtime, entry.uname, entry.gname = epoch, "", ""
    if path.is_dir():
        entry.type, entry.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(entry)
        return
    entry.mode, entry.size = 0o644, path.stat().st_size
    with path.open("rb") as data:
        tar.addfile(entry, data)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, epoch: int) -> None:
    import io

    entry = tarfile.TarInfo(name)
    entry.mtime, entry.mode, entry.size = epoch, 0o644, len(data)
    tar.addfile(entry, io.BytesIO(data))
