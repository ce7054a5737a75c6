"""The `bench` extra: the packages the benchmark needs beyond gitfleet's own dependencies.

matplotlib draws the report's charts and psutil reads the CPU and memory of the processes under
test. They are optional so that a gitfleet install that never benchmarks does not carry them;
`gitfleet bench` checks for them before it starts anything, so a missing one fails at once with
the command that installs it rather than after the testbed is up. py-spy, also in the extra,
draws the flame graphs of `--profile`; it is a program, not a module, so it is not checked
here: without it the report says each profile is missing and why.
"""

from __future__ import annotations

import importlib.util

MODULES = ("matplotlib", "psutil")
INSTALL = "pip install 'gitfleet[bench]'"


def missing() -> list[str]:
    """The modules of the extra that cannot be imported here."""
    return [name for name in MODULES if importlib.util.find_spec(name) is None]


def message(names: list[str]) -> str:
    return f"gitfleet bench needs the bench extra ({', '.join(names)} not installed): {INSTALL}"
