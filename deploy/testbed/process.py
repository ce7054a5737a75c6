"""Start, watch and stop the testbed's processes, identified by pid and checked by command line.

`wait_for` is also the project's one polling helper: the benchmark (`loadtest`) and the tests
wait with it too, each raising its own error on timeout.
"""

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
from typing import Any, TypeVar

from deploy.testbed.errors import StartError

T = TypeVar("T")


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
    check: Callable[[], T],
    *,
    what: str,
    timeout: float,
    watched: Sequence[Proc] = (),
    period: float | Callable[[], float] = 0.2,
    error: Callable[[str], Exception] | None = StartError,
) -> T:
    """Call `check` every `period` seconds until it returns something truthy, and return that.

    A process in `watched` that exits first fails the wait at once with StartError and the end
    of its log. When `timeout` seconds pass first, `error(message)` is raised, or, with
    `error=None`, the last (falsy) result is returned, for a wait that may end either way.
    `period` may be a function, for a pace that changes as the wait goes on.
    """
    deadline = time.monotonic() + timeout
    while True:
        _fail_if_exited(watched)
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            if error is None:
                return result
            raise error(_timed_out(what, timeout, watched))
        time.sleep(period() if callable(period) else period)


def _fail_if_exited(watched: Sequence[Proc]) -> None:
    for proc in watched:
        if not proc.is_running():
            raise StartError(
                f"{proc.component} of {proc.cluster or 'the testbed'} exited during start "
                f"(log: {proc.log}); last lines:\n{proc.log_tail()}"
            )


def _timed_out(what: str, timeout: float, watched: Sequence[Proc]) -> str:
    logs = f" (logs: {', '.join(p.log for p in watched)})" if watched else ""
    return f"timed out after {timeout:g}s waiting for {what}{logs}"


def stop(procs: Sequence[Proc], *, grace: float) -> list[Proc]:
    """SIGTERM every running process, SIGKILL what outlives `grace`; return the killed ones."""
    alive = [p for p in procs if p.is_running()]
    for proc in alive:
        _signal(proc, signal.SIGTERM)
    wait_for(
        lambda: not any(p.is_running() for p in alive),
        what="the processes to exit",
        timeout=grace,
        period=0.1,
        error=None,
    )
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
    wait_for(
        lambda: not proc.is_running(),
        what=f"{proc.component} to exit",
        timeout=timeout,
        period=0.05,
        error=None,
    )
