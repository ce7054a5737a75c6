"""The worker's malloc arena limit, in fresh interpreters: eight threads allocating with the
GIL released (ctypes calls release it) get an arena each without the limit, two with it."""

import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="arenas and malloc_stats are glibc's"
)
ROOT = Path(__file__).resolve().parents[3]
CHURN = textwrap.dedent(
    """
    import ctypes, sys, threading
    from worker.allocator import limit_arenas
    if sys.argv[1] == "limit":
        assert limit_arenas() is True
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    def churn():
        for _ in range(20000):
            libc.free(libc.malloc(2048))
    threads = [threading.Thread(target=churn) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    libc.malloc_stats()  # one "Arena N:" block per arena, on the C stderr
    """
)


def _arenas(mode: str, **env: str) -> int:
    clean = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    done = subprocess.run(
        [sys.executable, "-c", CHURN, mode],
        capture_output=True,
        text=True,
        env={**clean, **env},
        cwd=ROOT,
        check=True,
        timeout=60,
    )
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


def test_a_worker_process_allocates_from_at_most_two_arenas() -> None:
    assert _arenas("none") > 2  # what glibc does by itself with eight busy threads
    assert _arenas("limit") <= 2


@pytest.mark.parametrize(
    "setting", [{"MALLOC_ARENA_MAX": "4"}, {"GLIBC_TUNABLES": "glibc.malloc.arena_max=4"}]
)
def test_an_operator_s_arena_limit_wins(setting: dict[str, str]) -> None:
    script = "from worker.allocator import limit_arenas; assert limit_arenas() is False"
    kept = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    subprocess.run(
        [sys.executable, "-c", script], env={**kept, **setting}, cwd=ROOT, check=True, timeout=60
    )
