"""What the profile entry says when py-spy gives up, read from py-spy's own output, and how
many samples a collapsed-stacks file holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.profiling import reason, samples

GONE = """Error: Failed to get process executable name. Check that the process is running.

Caused by:
    0: No such file or directory (os error 2)
    1: No such file or directory (os error 2)

Stack backtrace:
   0: <E as anyhow::context::ext::StdError>::ext_context
"""
NOT_PYTHON = """Error: Failed to find python version from target process

Stack backtrace:
   0: anyhow::error::<impl anyhow::Error>::msg
"""
REFUSED = (
    "Permission Denied: Try running again with elevated permissions by going "
    "'sudo env \"PATH=$PATH\" !!'\n"
)


@pytest.mark.parametrize(
    ("log", "said"),
    [
        (
            GONE,
            "Error: Failed to get process executable name. Check that the process is running. "
            "No such file or directory (os error 2)",
        ),
        (NOT_PYTHON, "Error: Failed to find python version from target process"),
        (REFUSED, REFUSED.strip()),
        ("", ""),
    ],
)
def test_the_reason_is_py_spys_error_with_its_causes_without_the_backtrace(
    tmp_path: Path, log: str, said: str
) -> None:
    path = tmp_path / "py-spy.log"
    path.write_text(log)
    assert reason(path) == said


def test_samples_add_up_the_count_ending_each_collapsed_stack(tmp_path: Path) -> None:
    collapsed = tmp_path / "stacks.txt"
    collapsed.write_text("<module> (x.py:4);spin (x.py:2) 90\n<module> (x.py:5) 4\n\n")
    assert samples(collapsed) == 94
    assert samples(tmp_path / "never-written.txt") == 0
