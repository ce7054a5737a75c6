"""Flame graphs of running Python processes for the length of a phase (`gitfleet bench --profile`).

py-spy samples a process from outside by reading its memory (`--nonblocking`: the target is
never paused, so the CPU the bench reads from /proc stays the target's own; py-spy's cost shows
only as load on the machine). It samples only the thread holding the GIL (`--gil`), so a
profile shows where the process spends its Python CPU and never a thread waiting, whatever
py-spy's idle heuristics make of it; CPU spent with the GIL released (TLS, zlib, system calls)
is not in it.
Each process gets a recorder per format at the same rate: one draws the flame graph
(`--format flamegraph`, an SVG), the other writes the collapsed stacks (`--format raw`, one
`frame;frame;... count` line per stack) that other tools can diff or redraw; py-spy writes
one format per run. A recorder runs until it is sent SIGINT, on which py-spy writes its
file (or until the target exits).

Profiling never fails a run: when py-spy is not installed, cannot attach (ptrace refused by the
kernel or a container, a process that is not Python), exits early or writes nothing, the
profile's entry carries `error` saying why, in py-spy's own words where it gave some.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from deploy.testbed.process import wait_for

RATE = 50  # samples per second per recorder: 4 to 6 recorders share a 2-core machine
STOP_TIMEOUT_S = 30.0
ATTACH_TIMEOUT_S = 15.0
SAMPLING = b"Sampling process"  # py-spy's banner once it has attached
FORMATS = {"flamegraph": "svg", "raw": "txt"}
INSTALL = "pip install 'gitfleet[bench]' (py-spy)"
IDLE = (
    "no samples: the process ran no Python for the whole phase (py-spy --gil samples only "
    "the thread holding the GIL)"
)


def py_spy() -> str | None:
    """The py-spy next to this interpreter (a virtualenv's bin/), else the one on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


@dataclass(frozen=True)
class Profile:
    """One process's profile over one phase. `svg` and `collapsed` are paths relative to the
    report folder, None when missing; `samples` counts the collapsed stacks' samples (py-spy
    skips idle stacks, so an idle process has few); `error` says why a file is missing."""

    phase: str
    process: str
    pid: int
    svg: str | None
    collapsed: str | None
    samples: int
    error: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Recorder:
    """One py-spy process writing one format of one target's profile."""

    output: Path
    log: Path
    child: subprocess.Popen[bytes] | None
    error: str | None = None

    def stop(self) -> None:
        """SIGINT (py-spy then writes its file) and wait; kill it if it does not end."""
        child = self.child
        if child is None:
            return
        if child.poll() is None:
            child.send_signal(signal.SIGINT)
            try:
                child.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                self.error = f"py-spy did not stop within {STOP_TIMEOUT_S:.0f}s of SIGINT"
                return
        if child.returncode != 0:
            self.error = reason(self.log) or f"py-spy exited with status {child.returncode}"

    def attached_or_done(self) -> bool:
        """Whether py-spy has attached (its banner is in the log) or is gone."""
        if self.child is None or self.child.poll() is not None:
            return True
        return self.log.exists() and SAMPLING in self.log.read_bytes()

    def problem(self) -> str | None:
        if self.error is None and not _written(self.output):
            return "py-spy wrote no output"
        return self.error


def _written(path: Path) -> bool:
    return path.exists() and path.stat().st_size > 0


def reason(log: Path) -> str:
    """py-spy's reason: its `Error:` line with the causes it lists under it, else its last
    line."""
    lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    first = next((i for i, x in enumerate(lines) if x.startswith("Error:")), None)
    if first is None:
        return lines[-1] if lines else ""
    said = [lines[first]]
    for line in lines[first + 1 :]:
        if line.startswith("Stack backtrace"):
            break
        if line != "Caused by:":  # then numbered causes, "0: No such file or directory"
            said.append(line.split(": ", 1)[-1] if line[:1].isdigit() else line)
    return " ".join(dict.fromkeys(said))


def stacks(collapsed: Path) -> Iterator[tuple[str, int]]:
    """Each stack of a collapsed-stacks file (`frame;frame;... count` lines) with its count;
    other lines are skipped, and a file never written has none."""
    if not collapsed.exists():
        return
    with collapsed.open(errors="replace") as lines:
        for line in lines:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if stack and count.isdigit():
                yield stack, int(count)


def samples(collapsed: Path) -> int:
    """Samples in a collapsed-stacks file (the count ending each line)."""
    return sum(count for _, count in stacks(collapsed))


class Profiler:
    """Records the flame graphs of a bench run: files under `folder` (the report folder's
    profiles/), py-spy's own logs under `logs`; `entries` lists every profile taken so far."""

    def __init__(
        self,
        folder: Path,
        logs: Path,
        *,
        rate: int = RATE,
        binary: str | None = None,
        formats: Sequence[str] = tuple(FORMATS),
    ) -> None:
        self.folder = folder
        self.logs = logs
        self.rate = rate
        self.binary = binary or py_spy()
        if "raw" not in formats or not set(formats) <= set(FORMATS):
            raise ValueError(f"formats: 'raw' and any of {sorted(FORMATS)}, not {formats}")
        self.formats = tuple(formats)
        self.entries: list[Profile] = []
        self._running: dict[tuple[str, str, int], dict[str, Recorder]] = {}

    def start(self, phase: str, targets: Mapping[str, int]) -> None:
        """Start recording each `process name -> pid` of `targets` for `phase`, and return once
        every recorder samples or has given up (then `stop` tells why), so the profile covers
        what follows."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        started: list[Recorder] = []
        for process, pid in targets.items():
            recorders = {fmt: self._record(phase, process, pid, fmt) for fmt in self.formats}
            self._running[(phase, process, pid)] = recorders
            started += recorders.values()

        def attached() -> bool:
            return all(r.attached_or_done() for r in started)

        what = f"py-spy to attach to {', '.join(targets)}"
        wait_for(attached, what=what, timeout=ATTACH_TIMEOUT_S, period=0.05, error=None)

    def _record(self, phase: str, process: str, pid: int, fmt: str) -> Recorder:
        output = self.folder / f"{phase}-{process}.{FORMATS[fmt]}"
        log = self.logs / f"{phase}-{process}.{fmt}.log"
        output.unlink(missing_ok=True)
        if self.binary is None:
            return Recorder(output, log, None, f"py-spy is not installed: {INSTALL}")
        cmd = [self.binary, "record", "--pid", str(pid), "--format", fmt, "--gil"]
        cmd += ["--rate", str(self.rate), "--nonblocking", "-o", str(output)]
        try:
            with log.open("wb") as sink:
                child = subprocess.Popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT
                )
        except OSError as e:
            return Recorder(output, log, None, f"py-spy could not start: {e}")
        return Recorder(output, log, child)

    def stop(self) -> list[Profile]:
        """Stop every recorder started; the profiles they made (each also in `entries`)."""
        found = []
        for (phase, process, pid), recorders in self._running.items():
            for recorder in recorders.values():
                recorder.stop()
            found.append(self._profile(phase, process, pid, recorders))
        self._running.clear()
        self.entries += found
        return found

    def _profile(self, phase: str, process: str, pid: int, rec: dict[str, Recorder]) -> Profile:
        svg, raw = rec.get("flamegraph"), rec["raw"]
        count = samples(raw.output)
        problems = {f: p for f, r in rec.items() if (p := r.problem()) is not None}
        if raw.error is None and count == 0:  # attached and stopped well, saw nothing
            problems = {f: IDLE for f in rec}
        error = "; ".join(dict.fromkeys(problems.values())) or None
        return Profile(
            phase=phase,
            process=process,
            pid=pid,
            svg=None if svg is None or "flamegraph" in problems else self._relative(svg.output),
            collapsed=None if "raw" in problems else self._relative(raw.output),
            samples=count,
            error=error,
        )

    def _relative(self, path: Path) -> str:
        return os.path.relpath(path, self.folder.parent)
