"""Secrets never leave where they were given: a scan of everything a realistic run wrote.

One run with the real API (in this process, its logging captured to a file and its spans to a
JSON-lines file), a real worker process (`python -m worker --log-level DEBUG`, its output and
its GITFLEET_TRACE_FILE kept), the real testbed, a git server over HTTP with basic auth and a
Redis that requires AUTH. Planted, each unique to the run:

- a cluster bearer token (a ServiceAccount token minted for the run) in the kubeconfig the
  admin registers;
- the git password of the repository, given as the apps' own credentials and as repository
  credentials an admin registers for the project;
- the values of a Kubernetes Secret kept in the repository (and a second value committed
  later, which the diff sees), found as such or base64-encoded;
- a token put in a repository URL's user part (and password part), which the API must refuse
  without echoing it;
- the project's webhook secret (a signed push is delivered), the Redis password, and the three
  API tokens (their creation answers aside).

The run: syncs, a sync that fails at apply and one that fails at fetch, a diff, history reads,
app, project and cluster GETs by an admin, a member and a viewer. Then every log, both trace
files, every API answer, and every Redis value (the encrypted credentials included, whose
ciphertext must not hold the plaintext either; rq's zlib-compressed job data decompressed) is
scanned for each planted secret. The test fails listing every place a secret was found.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import subprocess
import sys
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from redis import ConnectionPool, Redis

from api.app import create_app
from api.deps import get_dispatcher
from api.settings import Settings
from fleet.control.routing.dispatch import Dispatcher
from fleet.control.routing.membership import live_workers
from fleet.kube.client import KubeClient
from fleet.model import ObjectRef
from fleet.telemetry.sdk import FileSpanExporter, setup_tracing
from tests.conftest import Cluster
from tests.support import manifests as m
from tests.support.fleet import ROOT, FleetEnv, wait_until
from tests.support.gitserver import GitHttpServer
from tests.support.redis_server import RedisServer

SYNC_TIMEOUT = 120
DONE = ("succeeded", "failed")


def _secret(kind: str) -> str:
    return f"planted-{kind}-{uuid.uuid4().hex}"


@dataclass
class Planted:
    """Every secret of the run, by what it is."""

    git_password: str = field(default_factory=lambda: _secret("git-password"))
    secret_value: str = field(default_factory=lambda: _secret("secret-value"))
    next_secret_value: str = field(default_factory=lambda: _secret("next-secret-value"))
    url_token: str = field(default_factory=lambda: _secret("url-token"))
    redis_password: str = field(default_factory=lambda: _secret("redis-password"))
    webhook_secret: str = field(default_factory=lambda: _secret("webhook-secret"))
    admin_token: str = field(default_factory=lambda: f"gf_{_secret('admin-token')}")
    cluster_token: str = ""
    api_tokens: dict[str, str] = field(default_factory=dict)

    def needles(self) -> dict[str, bytes]:
        found = {
            "cluster token": self.cluster_token,
            "git password": self.git_password,
            "Secret value": self.secret_value,
            "Secret value (base64)": _b64(self.secret_value),
            "next Secret value": self.next_secret_value,
            "next Secret value (base64)": _b64(self.next_secret_value),
            "token in a repo URL": self.url_token,
            "Redis password": self.redis_password,
            "project webhook secret": self.webhook_secret,
            "admin token": self.admin_token,
            **{f"{role} token": token for role, token in self.api_tokens.items()},
        }
        assert all(found.values()), "a secret was not planted"
        return {name: value.encode() for name, value in found.items()}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@dataclass
class Recorder:
    """The API client: every answer is kept, labelled, for the scan."""

    client: TestClient
    answers: dict[str, bytes] = field(default_factory=dict)

    def call(self, method: str, path: str, token: str, **kwargs: Any) -> Any:
        headers = {"Authorization": f"Bearer {token}"}
        response = self.client.request(method, path, headers=headers, **kwargs)
        self.answers[f"{method} {path} #{len(self.answers)}"] = response.content
        return response


# -- the cluster: a ServiceAccount token minted for this run --------------------------------


@dataclass
class ClusterToken:
    kube: KubeClient
    namespace: str = field(default_factory=lambda: f"scan-sa-{uuid.uuid4().hex[:8]}")

    def mint(self) -> str:
        """A cluster-admin ServiceAccount and a token for it (TokenRequest)."""
        ns = self.namespace
        self.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        meta = {"name": "gitfleet", "namespace": ns}
        self.kube.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta})
        self.kube.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": ns},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "gitfleet", "namespace": ns}],
            }
        )
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        }
        path = f"/api/v1/namespaces/{ns}/serviceaccounts/gitfleet/token"
        answer = self.kube.request("POST", path, body=request)
        token: str = answer["status"]["token"]
        return token

    def remove(self) -> None:
        rbac = ObjectRef(
            "rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "", self.namespace
        )
        self.kube.delete(rbac)
        self.kube.delete(ObjectRef("", "v1", "Namespace", "", self.namespace))


def kubeconfig_with(cluster: Cluster, token: str) -> str:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    return yaml.safe_dump(config)


# -- the repository ---------------------------------------------------------------------------


def secret_manifest(value: str) -> str:
    return f"""apiVersion: v1
kind: Secret
metadata:
  name: creds
type: Opaque
data:
  password: {_b64(value)}
"""


def broken_configmap() -> str:
    """A ConfigMap the API server refuses (a label value may not hold spaces)."""
    return m.configmap("broken", extra_meta="  labels:\n    team: not a valid value\n")


# -- the run ----------------------------------------------------------------------------------


@dataclass
class Run:
    fleet: FleetEnv
    api: Recorder
    planted: Planted
    cluster: str
    repo_url: str
    namespaces: dict[str, str]
    files: dict[str, Path]
    worker: subprocess.Popen[bytes] | None = None


@pytest.fixture
def run(testbed: list[Cluster], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    planted = Planted()
    monkeypatch.setenv("GITFLEET_INSECURE_GIT_HOSTS", "127.0.0.1")
    (tmp_path / "redis").mkdir()
    redis_server = RedisServer(tmp_path / "redis", password=planted.redis_password)
    cluster = testbed[0]
    kube = cluster.client()
    minted = ClusterToken(kube)
    fleet = FleetEnv(redis_server.url, tmp_path / "fleet")
    git = GitHttpServer(username="gitfleet", password=planted.git_password).start()
    handler, processor, level = None, None, logging.getLogger().level
    try:
        planted.cluster_token = minted.mint()
        files = {
            name: tmp_path / name
            for name in ("api.log", "api-traces.jsonl", "worker.log", "worker-traces.jsonl")
        }
        handler = _capture_logging(files["api.log"])
        processor = SimpleSpanProcessor(FileSpanExporter(files["api-traces.jsonl"]))
        setup_tracing("gitfleet-api").add_span_processor(processor)
        namespaces = _namespaces(kube, fleet, cluster.name)
        fleet.clusters[cluster.name] = cluster  # FleetEnv.close deletes the namespaces
        settings = Settings.model_validate(
            {
                "redis_url": redis_server.url,
                "admin_token": planted.admin_token,
                "secret_key": fleet.secret_key,
                "prefix": fleet.prefix,
                "diff_timeout_s": 60,
                "insecure_git_hosts": "127.0.0.1",
            }
        )
        app = create_app(settings)
        dispatcher = Dispatcher(fleet.redis, prefix=fleet.prefix)
        app.dependency_overrides[get_dispatcher] = lambda: dispatcher
        with TestClient(app) as client:
            yield Run(
                fleet=fleet,
                api=Recorder(client),
                planted=planted,
                cluster=cluster.name,
                repo_url=git.add("apps", fleet.repo.path),
                namespaces=namespaces,
                files=files,
            )
    finally:
        if processor is not None:
            processor.shutdown()
        if handler is not None:
            logging.getLogger().removeHandler(handler)
            logging.getLogger().setLevel(level)
            handler.close()
        fleet.close()
        git.stop()
        minted.remove()
        kube.close()
        redis_server.stop()


def _capture_logging(path: Path) -> logging.Handler:
    handler = logging.FileHandler(path)
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    return handler


def _namespaces(kube: KubeClient, fleet: FleetEnv, cluster: str) -> dict[str, str]:
    """One namespace per app, made by the admin (the apps do not create them)."""
    suffix = uuid.uuid4().hex[:8]
    found = {app: f"scan-{app}-{suffix}" for app in ("good", "shared", "broken", "unfetched")}
    for app, namespace in found.items():
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        fleet.created.append((app, cluster, namespace))
    return found


def start_worker(run: Run) -> subprocess.Popen[bytes]:
    """A real worker process, logging at DEBUG, tracing to its own file."""
    env = {
        **os.environ,
        "GITFLEET_REDIS_URL": run.fleet.redis_url,
        "GITFLEET_SECRET_KEY": run.fleet.secret_key,
        "GITFLEET_PREFIX": run.fleet.prefix,
        "GITFLEET_CACHE_DIR": str(run.fleet.folder / "cache"),
        "GITFLEET_TRACE_FILE": str(run.files["worker-traces.jsonl"]),
    }
    args = ["--name", "scan", "--ttl", "2", "--lease-ttl", "4", "--log-level", "DEBUG"]
    with run.files["worker.log"].open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker", *args],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    run.fleet.processes.append(proc)  # FleetEnv.close stops it if the test did not
    run.worker = proc
    wait_until(
        lambda: "scan" in live_workers(run.fleet.redis, prefix=run.fleet.prefix),
        timeout=60,
        what="the worker to join",
    )
    return proc


def stop_worker(run: Run) -> None:
    """SIGTERM, so the worker flushes its spans to the trace file."""
    assert run.worker is not None
    run.worker.terminate()
    run.worker.wait(timeout=60)


# -- the registry, through the API ------------------------------------------------------------


def register(run: Run) -> None:
    """The admin registers the cluster, the team's project and its tokens; the member its apps."""
    api, planted, admin = run.api, run.planted, run.planted.admin_token
    body = {
        "name": run.cluster,
        "kubeconfig": kubeconfig_with(run.fleet.clusters[run.cluster], planted.cluster_token),
    }
    _expect(api.call("POST", "/api/v1/clusters", admin, json=body), 201)
    project = {
        "name": "team-a",
        "sourceRepos": [run.repo_url],
        "destinations": [
            {"cluster": run.cluster, "namespace": ns} for ns in run.namespaces.values()
        ],
        "webhookSecret": planted.webhook_secret,
    }
    _expect(api.call("POST", "/api/v1/projects", admin, json=project), 201)
    repository = {
        "name": "team-a-git",
        "url": run.repo_url,
        "projects": ["team-a"],
        "username": "gitfleet",
        "password": planted.git_password,
    }
    _expect(api.call("POST", "/api/v1/repositories", admin, json=repository), 201)
    for role, body in (
        ("member", {"name": "team-a-dev", "role": "member", "project": "team-a"}),
        ("viewer", {"name": "auditor", "role": "viewer"}),
    ):
        answer = api.call("POST", "/api/v1/tokens", admin, json=body)
        planted.api_tokens[role] = _expect(answer, 201).json()["token"]
        api.answers.pop(next(reversed(api.answers)))  # the one answer that shows a token
    member = planted.api_tokens["member"]
    for name, revision in (("good", "HEAD"), ("broken", "HEAD"), ("unfetched", "no-such-ref")):
        _expect(api.call("POST", "/api/v1/apps", member, json=app(run, name, revision)), 201)
    shared = app(run, "shared", "HEAD") | {"credentials": None}  # the repository credentials
    _expect(api.call("POST", "/api/v1/apps", member, json=shared), 201)


def app(run: Run, name: str, revision: str) -> dict[str, Any]:
    return {
        "name": name,
        "project": "team-a",
        "source": {"repo": run.repo_url, "path": name, "revision": revision},
        "destination": {"cluster": run.cluster, "namespace": run.namespaces[name]},
        "syncPolicy": {"retry": {"limit": 0}},
        "credentials": {"username": "gitfleet", "password": run.planted.git_password},
    }


def _expect(response: Any, status: int) -> Any:
    assert response.status_code == status, f"{response.status_code}: {response.text}"
    return response


def sync(run: Run, name: str, outcome: str) -> dict[str, Any]:
    """A manual sync by the member, waited for until its record says how it ended."""
    member = run.planted.api_tokens["member"]
    trace_id = _expect(run.api.call("POST", f"/api/v1/apps/{name}/sync", member), 202).json()[
        "trace_id"
    ]
    found: dict[str, Any] = {}

    def ended() -> bool:
        view = run.api.call("GET", f"/api/v1/apps/{name}", member).json()
        last = view["instances"][0]["last_sync"] if view.get("instances") else None
        if last and last["trace_id"] == trace_id and last["result"] in DONE:
            found.update(last)
            return True
        return False

    wait_until(ended, timeout=SYNC_TIMEOUT, what=f"the sync of {name}")
    assert found["result"] == outcome, found
    return found


def push(run: Run) -> None:
    """A push event signed with the project's own secret (the apps are manual: none syncs)."""
    payload = {
        "ref": "refs/heads/main",
        "before": "0" * 40,
        "after": run.fleet.repo.head(),
        "repository": {"clone_url": run.repo_url, "default_branch": "main"},
    }
    body = json.dumps(payload).encode()
    digest = hmac.new(run.planted.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "X-Hub-Signature-256": f"sha256={digest}",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "Content-Type": "application/json",
    }
    answer = run.api.client.post("/api/v1/webhooks/git", content=body, headers=headers)
    run.api.answers[f"POST /api/v1/webhooks/git #{len(run.api.answers)}"] = answer.content
    assert answer.status_code == 200, answer.text
    tracking_main = set(run.namespaces) - {"unfetched"}
    assert {s["app"] for s in answer.json()["skipped"]} == tracking_main, answer.text


def refuse_urls_with_tokens(run: Run) -> None:
    """Tokens in a repo URL are refused, as user or as password, and never echoed."""
    member, token = run.planted.api_tokens["member"], run.planted.url_token
    host = run.repo_url.removeprefix("http://")
    for url in (
        f"http://{token}@{host}",
        f"http://x-access-token:{token}@{host}",
        f"https://{token}@git.example.com/team-a/apps.git",
    ):
        body = app(run, "good", "HEAD") | {"credentials": None}
        body["source"]["repo"] = url
        created = run.api.call("POST", "/api/v1/apps", member, json={**body, "name": "leaky"})
        changed = run.api.call("PUT", "/api/v1/apps/good", member, json=body)
        for answer in (created, changed):
            assert 400 <= answer.status_code < 500, f"{url}: {answer.status_code} {answer.text}"


def read_everything(run: Run) -> None:
    """What people look at: every GET, as each role that may make it."""
    tokens = {"admin": run.planted.admin_token, **run.planted.api_tokens}
    for role, token in tokens.items():
        paths = ["/api/v1/apps", "/api/v1/projects", "/api/v1/clusters"]
        paths += [f"/api/v1/clusters/{run.cluster}", "/api/v1/projects/team-a"]
        for name in run.namespaces:
            paths += [f"/api/v1/apps/{name}", f"/api/v1/apps/{name}/history"]
        if role == "admin":
            paths += ["/api/v1/tokens", "/api/v1/repositories"]
        for path in paths:
            _expect(run.api.call("GET", path, token), 200)


# -- the scan ---------------------------------------------------------------------------------


def redis_values(redis: Redis) -> Iterator[tuple[str, bytes]]:
    """Every value in every database of the server, with where it is; zlib data inflated."""
    for name in redis.info("keyspace"):  # db0, db1, ...: the databases that hold keys
        pool = redis.connection_pool
        kwargs = {**pool.connection_kwargs, "db": int(name[2:])}
        client = Redis(connection_pool=ConnectionPool(pool.connection_class, **kwargs))
        for key in client.scan_iter(count=500):
            for where, value in _values_of(client, key):
                place = f"redis {name} {key.decode(errors='replace')}{where}"
                yield place, value
                inflated = _inflate(value)
                if inflated is not None:
                    yield f"{place} (zlib)", inflated
        client.connection_pool.disconnect()


def _values_of(client: Redis, key: bytes) -> Iterator[tuple[str, bytes]]:
    kind = client.type(key).decode()
    if kind == "string":
        yield "", client.get(key) or b""
    elif kind == "hash":
        for name, value in client.hgetall(key).items():
            yield f"[{name.decode(errors='replace')}]", value
            yield f"[{name.decode(errors='replace')}] (field name)", name
    elif kind == "list":
        for i, value in enumerate(client.lrange(key, 0, -1)):
            yield f"[{i}]", value
    elif kind == "set":
        for value in client.smembers(key):
            yield "{}", value
    elif kind == "zset":
        for value, _ in client.zrange(key, 0, -1, withscores=True):
            yield "{}", value
    elif kind == "stream":
        for entry_id, fields in client.xrange(key):
            for name, value in fields.items():
                yield f"<{entry_id.decode()}>[{name.decode(errors='replace')}]", value
                yield f"<{entry_id.decode()}>[{name.decode(errors='replace')}] (field name)", name
    yield " (key name)", key


def _inflate(value: bytes) -> bytes | None:
    try:
        return zlib.decompress(value)
    except zlib.error:
        return None


def scan(sources: dict[str, bytes], needles: dict[str, bytes]) -> list[str]:
    return [
        f"{secret} in {where}"
        for where, content in sources.items()
        for secret, needle in needles.items()
        if needle in content
    ]


def test_no_planted_secret_appears_in_any_log_trace_answer_or_redis_value(run: Run) -> None:
    repo = run.fleet.repo
    repo.commit(
        {
            "good/cm.yaml": m.configmap("settings"),
            "good/secret.yaml": secret_manifest(run.planted.secret_value),
            "broken/secret.yaml": secret_manifest(run.planted.secret_value),
            "broken/cm.yaml": broken_configmap(),
            "unfetched/cm.yaml": m.configmap("settings"),
            "shared/cm.yaml": m.configmap("settings"),
        }
    )
    register(run)
    start_worker(run)
    admin = run.planted.admin_token

    good = sync(run, "good", "succeeded")
    assert any(r["kind"] == "Secret" for r in good["resources"]), good
    sync(run, "shared", "succeeded")
    broken = sync(run, "broken", "failed")
    assert "ConfigMap/" in broken["error"] and "broken" in broken["error"], broken
    unfetched = sync(run, "unfetched", "failed")
    assert "no-such-ref" in unfetched["error"], unfetched
    repo.commit({"good/secret.yaml": secret_manifest(run.planted.next_secret_value)})
    diff = _expect(run.api.call("GET", "/api/v1/apps/good/diff", admin), 200).json()
    assert [c["kind"] for c in diff["clusters"][0]["changes"]] == ["Secret"], diff
    push(run)
    refuse_urls_with_tokens(run)
    read_everything(run)
    stop_worker(run)
    setup_tracing("gitfleet-api").force_flush()

    sources = {name: path.read_bytes() for name, path in run.files.items()}
    assert all(sources.values()), {name: len(data) for name, data in sources.items()}
    sources |= {f"API answer {label}": body for label, body in run.api.answers.items()}
    sources |= dict(redis_values(run.fleet.redis))
    check_the_scan_can_see(run, sources)
    hits = scan(sources, run.planted.needles())
    assert not hits, "planted secrets found:\n" + "\n".join(hits)


def check_the_scan_can_see(run: Run, sources: dict[str, bytes]) -> None:
    """The scan is worth its zero: it finds the Secret where it belongs (in the cluster), and it
    read the encrypted credentials and rq's compressed job data."""
    live = run.fleet.live(
        run.cluster, ObjectRef("", "v1", "Secret", run.namespaces["good"], "creds")
    )
    assert scan({"live Secret": repr(live).encode()}, run.planted.needles()) == [
        "Secret value (base64) in live Secret"
    ]
    credentials = {w.split()[2] for w in sources if w.startswith("redis") and "credentials" in w}
    assert len(credentials) >= 2, "the cluster's and the apps' encrypted credentials"
    assert any(where.endswith("(zlib)") for where in sources), sorted(sources)
