"""Start, watch and stop the testbed's processes, identified by pid and checked by command line."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from deploy.testbed.errors import StartError


@dataclass
class Proc:
    """One started component: which cluster, which program, its pid and log file."""

    cluster: str
    component: str
    pid: int
    binary: str
    log: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def is_running(self) -> bool:
        child = _CHILDREN.get(self.pid)
        if child is not None:  # started by this process: exec may not have happened yet
            return child.poll() is None
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        zombie = stat.rsplit(")", 1)[-1].split()[0] == "Z"
        first = cmdline.split(b"\0", 1)[0]  # programs like redis-server rewrite their title
        binary = self.binary.encode()
        return not zombie and (first == binary or first.startswith(binary + b" "))

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = Path(self.log).read_text(errors="replace")
        except OSError:
            return "(no log written)"
        return "\n".join(text.rstrip().splitlines()[-lines:])


_HANDED_OUT: set[int] = set()
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def free_port() -> int:
    """A free loopback port, never one this process handed out before."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def ensure_port_free(port: int, what: str) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise StartError(
                f"port {port} on 127.0.0.1 (wanted for {what}) is in use: stop the process "
                "holding it or pick another --base-port"
            ) from e


def start(
    cluster: str,
    component: str,
    cmd: Sequence[str],
    log: Path,
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> Proc:
    """Start a detached process whose output goes to `log`."""
    with log.open("ab") as sink:
        child = subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    _CHILDREN[child.pid] = child
    return Proc(cluster, component, child.pid, str(cmd[0]), str(log))


def wait_for(
    check: Callable[[], bool], *, what: str, watched: Sequence[Proc], timeout: float
) -> None:
    """Poll `check` until it is true; fail early, with its log, when a watched process exits."""
    deadline = time.monotonic() + timeout
    while True:
        for proc in watched:
            if not proc.is_running():
                raise StartError(
                    f"{proc.component} of {proc.cluster or 'the testbed'} exited during start "
                    f"(log: {proc.log}); last lines:\n{proc.log_tail()}"
                )
        if check():
            return
        if time.monotonic() > deadline:
            logs = ", ".join(p.log for p in watched)
            raise StartError(f"timed out after {timeout:.0f}s waiting for {what} (logs: {logs})")
        time.sleep(0.2)


def stop(procs: Sequence[Proc], *, grace: float) -> list[Proc]:
    """SIGTERM every running process, SIGKILL what outlives `grace`; return the killed ones."""
    alive = [p for p in procs if p.is_running()]
    for proc in alive:
        _signal(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(p.is_running() for p in alive):
        time.sleep(0.1)
    killed = [p for p in alive if p.is_running()]
    for proc in killed:
        _signal(proc, signal.SIGKILL)
    for proc in killed:
        _wait_gone(proc)
    reap(procs)
    return killed


def _signal(proc: Proc, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, sig)


def reap(procs: Sequence[Proc]) -> None:
    """Collect the exit status of stopped children this process started (no zombies)."""
    for proc in procs:
        child = _CHILDREN.pop(proc.pid, None)
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)


def _wait_gone(proc: Proc, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while proc.is_running() and time.monotonic() < deadline:
        time.sleep(0.05)
