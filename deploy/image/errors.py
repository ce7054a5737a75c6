"""The image build's error: what failed, and the log or command to look at."""

from __future__ import annotations

from fleet.errors import Fault, FleetError


class ImageBuildError(FleetError):
    """A build step failed, a build tool is missing, or the build does not run as root."""

    stage = "image"
    fault = Fault.USER
