"""What a registry read or write can refuse: a `StoreError` per reason a person can act on.

The API maps each to an HTTP status (`api.errors`); workers meet `NotFound` when an app was
deleted while its sync waited.
"""

from __future__ import annotations

from fleet.errors import Fault, FleetError


class StoreError(FleetError):
    stage = "store"
    fault = Fault.USER


class NotFound(StoreError):
    """No record with that name."""


class AlreadyExists(StoreError):
    """A record with that name is registered already."""


class InUse(StoreError):
    """Deleting the record would strand the applications that use it."""


class InvalidReference(StoreError):
    """The record names something that does not exist (a project, a cluster, an app)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class Conflict(StoreError):
    """Concurrent writes kept changing the registry; retrying the request helps."""

    retryable = True
