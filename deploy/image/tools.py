"""helm, kubectl and sops for the image: the binaries the testbed builds from pinned Go modules.

`deploy.testbed.build` compiles them (static, CGO off, `-trimpath`) from the go.mod/go.sum pins
under `deploy/testbed/gomod/`; the image gets a copy in /usr/local/bin, which is on its PATH, so
`fleet.engine.render.tools.find_tool` finds them.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from deploy.testbed.build import ensure_binaries

TOOLS = ("helm", "kubectl", "sops")  # sops decrypts SOPS-encrypted Secrets at render time
BIN = "usr/local/bin"


def binaries() -> dict[str, Path]:
    """{name: path} of the pinned render tools, built first if missing."""
    built = ensure_binaries(announce=True)
    return {name: built[name].resolve() for name in TOOLS}


def fingerprint(found: dict[str, Path]) -> str:
    digest = hashlib.sha256()
    for name in sorted(found):
        digest.update(name.encode() + b"\0" + hashlib.sha256(found[name].read_bytes()).digest())
    return digest.hexdigest()


def stage(root: Path, found: dict[str, Path]) -> list[str]:
    """Copy the binaries under `root`/usr/local/bin; return their paths relative to `root`."""
    (root / BIN).mkdir(parents=True, exist_ok=True)
    for name, path in found.items():
        shutil.copyfile(path, root / BIN / name)
        (root / BIN / name).chmod(0o755)
    return [f"{BIN}/{name}" for name in sorted(found)]
