"""`gitfleet bench --profile`'s recorder (`loadtest.profiling`) against real Python processes
started here: a busy one gives a flame graph and collapsed stacks naming its function; one that
py-spy may not attach to (the kernel refuses: py-spy runs as another user) and a missing py-spy
give an entry saying why, and nothing fails."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtest.profiling import Profile, Profiler, py_spy

# waits for a line on stdin, then burns CPU in a function the flame graph must name, then exits
BUSY = """
import sys, time
def burn_cpu_for_the_profiler(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(10_000))
print("ready", flush=True)
sys.stdin.readline()
burn_cpu_for_the_profiler(float(sys.argv[1]))
"""


@pytest.fixture
def busy_python() -> Iterator[subprocess.Popen[str]]:
    """A Python process that has started (said `ready`) and burns 2 s of CPU when told."""
    child = subprocess.Popen(
        [sys.executable, "-c", BUSY, "2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    yield child
    child.kill()
    child.wait()


def go(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None
    child.stdin.write("go\n")
    child.stdin.flush()


def test_a_busy_python_process_gets_a_flame_graph_and_collapsed_stacks_naming_its_code(
    tmp_path: Path, busy_python: subprocess.Popen[str]
) -> None:
    out = tmp_path / "out"
    profiler = Profiler(out / "profiles", tmp_path / "logs")
    profiler.start("cold_sync", {"worker-1": busy_python.pid})  # returns once py-spy samples
    go(busy_python)
    busy_python.wait(timeout=60)  # py-spy writes its files when the process ends
    [profile] = profiler.stop()
    assert profile.error is None, profile.error
    svg, collapsed = "profiles/cold_sync-worker-1.svg", "profiles/cold_sync-worker-1.txt"
    assert (profile.svg, profile.collapsed) == (svg, collapsed)
    drawn = (out / svg).read_text()
    assert "<svg" in drawn and "burn_cpu_for_the_profiler" in drawn
    stacks = (out / collapsed).read_text().splitlines()
    assert any("burn_cpu_for_the_profiler" in line for line in stacks)
    assert profile.samples > 0
    assert profiler.entries == [profile]


def test_a_refused_attach_is_reported_in_the_profile_and_the_process_runs_on(
    tmp_path: Path, busy_python: subprocess.Popen[str]
) -> None:
    as_nobody = tmp_path / "py-spy-as-nobody"  # an unprivileged py-spy: ptrace is refused
    spy = py_spy()
    assert spy is not None, "py-spy is part of the bench extra"
    as_nobody.write_text(
        f'#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups -- {spy} "$@"\n'
    )
    as_nobody.chmod(0o755)
    assert os.geteuid() == 0, "the refusal is made by running py-spy as another user than root"
    profiler = Profiler(tmp_path / "out" / "profiles", tmp_path / "logs", binary=str(as_nobody))
    profiler.start("noop", {"api": busy_python.pid})  # returns once py-spy has given up
    [profile] = profiler.stop()
    assert profile.svg is None and profile.collapsed is None and profile.samples == 0
    assert profile.error is not None and "Permission Denied" in profile.error
    assert busy_python.poll() is None
    assert not list((tmp_path / "out" / "profiles").glob("*.svg"))


def test_without_py_spy_the_profile_says_it_could_not_start(
    tmp_path: Path, busy_python: subprocess.Popen[str]
) -> None:
    missing = str(tmp_path / "no-py-spy-here")
    profiler = Profiler(tmp_path / "out" / "profiles", tmp_path / "logs", binary=missing)
    profiler.start("cold_sync", {"worker-2": busy_python.pid})
    assert profiler.stop() == [
        Profile(
            phase="cold_sync",
            process="worker-2",
            pid=busy_python.pid,
            svg=None,
            collapsed=None,
            samples=0,
            error=f"py-spy could not start: [Errno 2] No such file or directory: '{missing}'",
        )
    ]
