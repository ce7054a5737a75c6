"""Errors of the testbed, each with a message that says what to do."""

from __future__ import annotations

from fleet.errors import Fault, FleetError


class TestbedError(FleetError):
    stage = "testbed"
    fault = Fault.USER


class BuildError(TestbedError):
    """A Go build failed or no Go toolchain is installed."""


class StartError(TestbedError):
    """A component could not start: port in use, or it exited during start."""
