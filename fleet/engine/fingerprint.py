"""What a sync's desired state depends on, as a digest the next periodic check compares.

The digest is built from a text of the request that every process writes alike: a dataclass's
own repr would do, but a set of strings iterates in an order that depends on the process's
hash seed (PYTHONHASHSEED, random per process), so two workers, or one worker after a restart,
wrote different fingerprints for the same request and the next check ran a needless full sync.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from enum import Enum
from typing import Any

from fleet.engine.contract import SyncRequest
from fleet.model import Trigger


def fingerprint_of(request: SyncRequest, render_key: str) -> str:
    """What the desired state depends on: the render (tree id, renderer, parameters, tool
    version) and the request's knobs. Equal fingerprints mean the same desired objects."""
    knobs = dataclasses.replace(
        request,
        trigger=Trigger.MANUAL,
        revision="",
        credentials=None,
        dry_run=False,
        timeout=0.0,
        fetch_max_age=0.0,
    )
    return hashlib.sha256(f"{render_key}|{stable_repr(knobs)}".encode()).hexdigest()[:32]


_SCALARS = (str, bytes, int, float, bool, type(None), Enum)


def stable_repr(value: Any) -> str:
    """A text of `value` like its repr, with sets and dicts in sorted order, recursively; a
    dataclass shows the fields its own repr shows (credentials, leases and hints are
    `repr=False`). Any other type is a TypeError: its repr may name its address."""
    if isinstance(value, _SCALARS):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(stable_repr(item) for item in value) + "]"
    if isinstance(value, tuple):
        return "(" + "".join(stable_repr(item) + ", " for item in value) + ")"
    if isinstance(value, (set, frozenset)):
        return "frozenset({" + ", ".join(sorted(stable_repr(item) for item in value)) + "})"
    if isinstance(value, dict):
        pairs = sorted(f"{stable_repr(k)}: {stable_repr(v)}" for k, v in value.items())
        return "{" + ", ".join(pairs) + "}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        shown = ", ".join(f"{n}={stable_repr(getattr(value, n))}" for n in _shown(type(value)))
        return f"{type(value).__qualname__}({shown})"
    raise TypeError(
        f"fingerprint: no stable text for a {type(value).__qualname__} (a new request field? "
        "teach stable_repr its type, or its default repr would differ per process)"
    )


@functools.cache
def _shown(kind: type) -> tuple[str, ...]:
    """The fields a dataclass's own repr shows."""
    return tuple(f.name for f in dataclasses.fields(kind) if f.repr)
