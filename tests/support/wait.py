"""Poll for an outcome with a deadline (never a fixed sleep), failing the test on timeout."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from deploy.testbed.process import wait_for

T = TypeVar("T")


def eventually(check: Callable[[], T | None], *, timeout: float = 60, what: str = "") -> T:
    """Return check()'s first truthy result; fail with `what` when the deadline passes."""
    found = wait_for(
        check, what=what or str(check), timeout=timeout, period=0.1, error=AssertionError
    )
    assert found  # wait_for returns only a truthy result when it raises on timeout
    return found
