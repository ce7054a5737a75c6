"""The registry's records, counted before and after a fault (`records lost`).

The count is the coordinator's own backup document (`GET /api/v1/registry/export`): every
cluster, project, app, repository credential and token the registry holds. A record is known by
its name (`record.name` of each entry), so a record rewritten under the same name counts as
kept; one that is gone counts as lost. Besides the apps and clusters the
suite needs, `seed` adds a project, a repository credential and two tokens, so every kind of
record is there to lose.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from api.client import ClientError, CoordinatorClient

SECTIONS = ("clusters", "projects", "apps", "repositories", "tokens")


@dataclass(frozen=True)
class Records:
    """section -> the names of its records."""

    names: dict[str, frozenset[str]]

    @classmethod
    def of(cls, document: dict[str, Any]) -> Records:
        """The names in an export document."""
        return cls({s: frozenset(_name(e) for e in document.get(s, [])) for s in SECTIONS})

    def counts(self) -> dict[str, int]:
        return {section: len(names) for section, names in self.names.items()}

    def lost_since(self, before: Records) -> dict[str, list[str]]:
        lost = {
            section: sorted(names - self.names.get(section, frozenset()))
            for section, names in before.names.items()
        }
        return {section: names for section, names in lost.items() if names}


def snapshot(api: CoordinatorClient, *, timeout: float = 60.0) -> Records:
    """The registry's records, asking again while the coordinator cannot answer."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            document = json.loads(api.export_registry())
            break
        except ClientError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    return Records.of(document)


def _name(entry: dict[str, Any]) -> str:
    """An entry's record name (each entry is {"record": {...}, and its sealed secret or digest})."""
    record = entry.get("record") or {}
    return str(record.get("name") or entry.get("digest") or json.dumps(entry, sort_keys=True))


def seed(api: CoordinatorClient) -> None:
    """A project, a repository credential (for a remote the apps do not use), two tokens."""
    project = {
        "name": "faults-team",
        "sourceRepos": ["*"],
        "destinations": [{"cluster": "*", "namespace": "*"}],
    }
    api.call("POST", "/api/v1/projects", project)
    repository = {
        "name": "faults-repos",
        "url": "https://git.example.com/faults",
        "projects": ["faults-team"],
        "password": "faults-suite-repository-token",
    }
    api.call("POST", "/api/v1/repositories", repository)
    for name in ("faults-ci", "faults-viewer"):
        body = {"name": name, "role": "member", "project": "faults-team"}
        api.call("POST", "/api/v1/tokens", body)
