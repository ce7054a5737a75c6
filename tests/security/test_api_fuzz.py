"""The API under a fuzzer: schemathesis drives every operation of the OpenAPI schema through the
real ASGI app, over a real Redis, as an admin, a member of a restricted project, a viewer and
an anonymous caller. No answer may be a 5xx, and no body may exceed the API's 1 MiB limit.

Cases start from the schema (positive and negative generation, plus schemathesis' coverage
phase of boundary values). Most generated names are not DNS labels and most generated bodies
miss the registry's references, so a run made only of them would stop at 422 and 404; each
example therefore may swap a path name or a body field for a seeded one (`steer`), which lets
the fuzzer reach the handlers behind validation: policy checks, dependency checks, deletes.

Determinism: hypothesis runs derandomized with no example database, so CI sees the same cases
on every run; `max_examples` keeps the whole file to under a minute on two idle cores, and a
wall-clock budget (`Budget`) bounds it on a loaded machine by sending nothing more. The
dispatcher is the API tests' recording stand-in (`tests/api/conftest.py`), answering every diff
at once: the workers are not what is fuzzed here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from schemathesis.python.asgi import ASGIClient

from api.app import create_app
from api.deps import get_dispatcher
from api.settings import Settings
from fleet.control.keys import Keys
from tests.api.conftest import (
    ADMIN_TOKEN,
    WEBHOOK_SECRET,
    RecordedJob,
    RecordingDispatcher,
    fake_kubeconfig,
    settings_for,
)
from tests.support.redis_server import RedisServer

BODY_LIMIT = Settings().body_limit  # the API's request body limit (1 MiB), and on any answer
EXAMPLES = 100  # per operation, coverage phase included: about 30 s of CPU for the schema
PUSHES = 300  # signed push events
BUDGET_S = 90.0  # wall clock for the schema fuzz: on a loaded machine later examples send nothing
REPO = "https://git.example.com/team-a/shop.git"

CLUSTERS = ("east", "west")
PROJECTS = ("default", "team-a")
APPS = ("shop", "team-a-web", "team-a-db")
TOKENS = ("team-a-member", "viewer")
NAMES = (*CLUSTERS, *PROJECTS, *APPS, *TOKENS, "team-a-git", "fresh")

# Valid values a body field may be swapped for, so that bodies get past validation; the sync
# window is the impossible date the issue found (`0 0 31 2 *`).
HINTS: dict[str, list[Any]] = {
    "name": list(NAMES),
    "project": list(PROJECTS),
    "source": [{"repo": REPO, "path": "deploy"}, {"repo": REPO, "revision": "v1"}],
    "destination": [
        {"cluster": "east", "namespace": "team-a"},
        {"cluster": "west", "namespace": "other"},
        {"clusterSelector": {"env": "prod"}, "namespace": "team-a"},
    ],
    "syncPolicy": [
        {},
        {"automated": True, "prune": True, "selfHeal": True},
        {"syncWindows": [{"kind": "deny", "schedule": "0 0 31 2 *", "duration": "1h"}]},
        {"syncWindows": [{"kind": "allow", "schedule": "* * * * *", "duration": "5m"}]},
    ],
    "dependsOn": [[], ["team-a-db"], ["shop"], ["team-a-web"]],
    "credentials": [None, {"username": "git", "password": "fuzz-git-password"}],
    "kubeconfig": [fake_kubeconfig("fuzz-cluster-token")],
    "labels": [{}, {"env": "prod"}],
    "sourceRepos": [[], ["https://git.example.com/team-a/*"], ["*"]],
    "destinations": [[], [{"cluster": "*", "namespace": "team-a"}]],
    "clusterKinds": [[], ["Namespace"], ["*"]],
    "url": ["https://git.example.com/team-a", "http://127.0.0.1:9/x", "https://u:p@h/x"],
    "projects": [["*"], ["team-a"], ["no-such-project"]],
    "role": ["admin", "member", "viewer"],
    "revision": ["v1", "HEAD"],
    "cluster": list(CLUSTERS),
}


class AnsweringDispatcher(RecordingDispatcher):
    """Records requests like the API tests' stand-in and answers every diff with no change."""

    def wait(self, job: RecordedJob, timeout: float) -> dict[str, Any] | None:
        change = {"version": "v1", "kind": "ConfigMap", "namespace": "team-a", "name": "settings"}
        return {"revision": "0" * 40, "resources": [{**change, "action": "configured"}]}


@dataclass
class Fuzzed:
    app: FastAPI
    session: ASGIClient
    tokens: dict[str, str | None]


SCHEMA = schemathesis.openapi.from_dict(create_app(settings_for("redis://unused")).openapi())


def _seed(client: TestClient) -> dict[str, str | None]:
    """Two clusters, a restricted project with two apps and repository credentials, an app in
    `default`; the tokens."""
    for name, labels in zip(CLUSTERS, ({"env": "prod"}, {"env": "dev"}), strict=True):
        body = {"name": name, "kubeconfig": fake_kubeconfig(f"tok-{name}"), "labels": labels}
        _created(client.post("/api/v1/clusters", json=body))
    project = {
        "name": "team-a",
        "sourceRepos": ["https://git.example.com/team-a/*"],
        "destinations": [{"cluster": "east", "namespace": "team-a"}],
    }
    _created(client.post("/api/v1/projects", json=project))
    for name, team in (("team-a-db", "team-a"), ("team-a-web", "team-a"), ("shop", "default")):
        app = {
            "name": name,
            "project": team,
            "source": {"repo": REPO, "path": name},
            "destination": {"cluster": "east", "namespace": "team-a"},
            "dependsOn": ["team-a-db"] if name == "team-a-web" else [],
            "syncPolicy": {"automated": True},
        }
        _created(client.post("/api/v1/apps", json=app))
    repository = {
        "name": "team-a-git",
        "url": "https://git.example.com/team-a",
        "projects": ["team-a"],
        "password": "fuzz-repository-token",
    }
    _created(client.post("/api/v1/repositories", json=repository))
    member = {"name": "team-a-member", "role": "member", "project": "team-a"}
    viewer = {"name": "viewer", "role": "viewer"}
    return {
        "admin": ADMIN_TOKEN,
        "member": _created(client.post("/api/v1/tokens", json=member))["token"],
        "viewer": _created(client.post("/api/v1/tokens", json=viewer))["token"],
        "anonymous": None,
    }


def _created(response: Any) -> dict[str, Any]:
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


@pytest.fixture
def fuzzed(redis_server: RedisServer) -> Iterator[Fuzzed]:
    """A fresh app and registry per operation: its lifespan runs in the TestClient, and the
    fuzzer's requests go through schemathesis' ASGI client (never entered, so it starts no
    second lifespan)."""
    prefix = f"fuzz{uuid.uuid4().hex[:8]}"
    app = create_app(settings_for(redis_server.url, prefix=prefix))
    dispatcher = AnsweringDispatcher()
    app.dependency_overrides[get_dispatcher] = lambda: dispatcher
    with TestClient(app, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
        tokens = _seed(client)
        yield Fuzzed(app, ASGIClient(app), tokens)
        store = app.state.store
        for key in store.redis.scan_iter(Keys(prefix).pattern):
            store.redis.delete(key)


class Budget:
    """The schema fuzz's time bound, shared by its operations: past it an example sends no
    request, so a loaded machine runs fewer cases instead of a slower `make test`."""

    started: float | None = None

    @classmethod
    def spent(cls) -> bool:
        now = time.monotonic()
        cls.started = cls.started or now
        return now - cls.started > BUDGET_S


def steer(case: Any, data: st.DataObject) -> None:
    """Either leave the case as generated, or swap its path name and every hinted body field
    for seeded, valid values (so the body gets past validation and reaches the handler)."""
    if not data.draw(st.booleans(), label="steered"):
        return
    params = case.path_parameters
    if params and "name" in params:
        params["name"] = data.draw(st.sampled_from(NAMES), label="name")
    if isinstance(case.body, dict):
        for field, choices in HINTS.items():
            if field in case.body:
                case.body[field] = data.draw(st.sampled_from(choices), label=field)


@SCHEMA.parametrize()
@SCHEMA.given(data=st.data())
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_operation_answers_a_server_error_or_an_oversized_body(
    case: Any, data: st.DataObject, fuzzed: Fuzzed
) -> None:
    # every draw comes before the time check: an example must draw the same data whenever it
    # runs, or hypothesis calls the strategy flaky when the budget runs out mid-replay
    steer(case, data)
    role = data.draw(st.sampled_from(sorted(fuzzed.tokens)), label="role")
    if Budget.spent():
        return
    token = fuzzed.tokens[role]
    if token is not None:  # the anonymous caller sends whatever the case holds, or nothing
        headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
        case.headers = {**headers, "Authorization": f"Bearer {token}"}
    response = case.call(session=fuzzed.session)
    where = f"{case.method} {case.formatted_path} as {role}"
    assert response.status_code < 500, f"{where}: {response.status_code} {response.text[:500]}"
    assert len(response.content) <= BODY_LIMIT, f"{where}: {len(response.content)} bytes"


# -- signed push events: the webhook's body has no schema, so its fuzzing is written here -------

SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
SHAS = st.sampled_from(["a" * 40, "b" * 40, "0" * 40]) | JSON
URLS = st.sampled_from([REPO, "git@git.example.com:team-a/shop.git", "https://other/x"]) | JSON
CHANGES = st.lists(st.sampled_from(["shop/cm.yaml", "team-a-web/a.yaml", "x"]), max_size=3) | JSON
COMMIT = st.fixed_dictionaries({}, optional={k: CHANGES for k in ("added", "modified", "removed")})
REPOSITORY = st.fixed_dictionaries(
    {},
    optional={
        "clone_url": URLS,
        "html_url": URLS,
        "ssh_url": URLS,
        "default_branch": st.sampled_from(["main", ""]) | JSON,
        "pushed_at": st.builds(lambda: int(time.time())) | JSON,  # deliveries have an age bound
    },
)
PUSH = st.fixed_dictionaries(
    {"repository": REPOSITORY | JSON},
    optional={
        "ref": st.sampled_from(["refs/heads/main", "refs/tags/v1", "main"]) | JSON,
        "before": SHAS,
        "after": SHAS,
        "forced": st.booleans() | JSON,
        "commits": st.lists(COMMIT | JSON, max_size=3) | JSON,
        "head_commit": COMMIT | JSON,
    },
)
BODIES = PUSH.map(lambda p: json.dumps(p).encode()) | JSON.map(lambda v: json.dumps(v).encode())
DEEP = b"[" * 100_000 + b"]" * 100_000


def signed(body: bytes, delivery: str, event: str = "push") -> dict[str, str]:
    digest = hmac.new(WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {
        "X-Hub-Signature-256": f"sha256={digest}",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "Content-Type": "application/json",
    }


@given(body=BODIES | st.binary(max_size=40), event=st.sampled_from(["push", "ping"]), n=st.uuids())
@example(body=DEEP, event="push", n=uuid.UUID(int=0))
@settings(
    max_examples=PUSHES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_signed_push_event_answers_a_server_error(
    body: bytes, event: str, n: Any, fuzzed: Fuzzed
) -> None:
    response = fuzzed.session.post(
        "http://testserver/api/v1/webhooks/git", data=body, headers=signed(body, str(n), event)
    )
    where = f"push {body[:200]!r}"
    assert response.status_code < 500, f"{where}: {response.status_code} {response.text[:500]}"
    assert len(response.content) <= BODY_LIMIT, f"{where}: {len(response.content)} bytes"


# -- bodies no schema describes: each gets a 4xx that says what is wrong ---------------------

HOSTILE = {
    "nested 100,000 deep": DEEP,
    "nested objects": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "not UTF-8": b"\xff\xfe{}",
    "a 5,000-digit number": b"9" * 5_000,
    "an unpaired surrogate": b'{"name": "a\\ud800"}',
}
WRITES = [
    ("POST", "/api/v1/apps"),
    ("PUT", "/api/v1/apps/shop"),
    ("POST", "/api/v1/apps/shop/sync"),
    ("POST", "/api/v1/clusters"),
    ("PUT", "/api/v1/clusters/east"),
    ("POST", "/api/v1/projects"),
    ("PUT", "/api/v1/projects/team-a"),
    ("POST", "/api/v1/repositories"),
    ("POST", "/api/v1/tokens"),
]


@pytest.mark.parametrize("what", sorted(HOSTILE))
@pytest.mark.parametrize(("method", "path"), WRITES)
def test_a_hostile_json_body_is_refused_with_a_4xx(
    method: str, path: str, what: str, fuzzed: Fuzzed
) -> None:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"}
    response = fuzzed.session.request(
        method, f"http://testserver{path}", data=HOSTILE[what], headers=headers
    )
    assert 400 <= response.status_code < 500, response.text[:500]
    assert "detail" in response.json()


@pytest.mark.parametrize("what", sorted(HOSTILE))
def test_a_hostile_signed_push_is_refused_with_a_4xx(what: str, fuzzed: Fuzzed) -> None:
    body = HOSTILE[what]
    response = fuzzed.session.post(
        "http://testserver/api/v1/webhooks/git", data=body, headers=signed(body, what)
    )
    assert 400 <= response.status_code < 500, response.text[:500]
    assert response.json()["detail"]
