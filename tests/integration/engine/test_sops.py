"""SOPS-encrypted Secrets in git, decrypted at render time with the project's age key.

The Secret is encrypted by the test with the `sops` and `age-keygen` built from pinned Go
modules (`deploy/testbed/gomod/sops`), committed to a real git repository, applied through the
fleet (API, worker, testbed cluster), and its plaintext is then looked for everywhere it must
never be: the worker's logs, the spans, the render cache on disk, the diff and every API
response, the age key too."""

from __future__ import annotations

import base64
import logging
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fleet.model import ObjectRef
from tests.support import manifests as m
from tests.support.fleet import FleetEnv

TOKEN = "test-admin-token"


@pytest.fixture
def api(fleet_api: Callable[..., TestClient]) -> TestClient:
    return fleet_api(TOKEN)


class Sops:
    """The built sops and age-keygen, run in a folder of their own."""

    def __init__(self, binaries: dict[str, Path], folder: Path) -> None:
        self.sops, self.keygen, self.folder = binaries["sops"], binaries["age-keygen"], folder
        self.env = {"HOME": str(folder), "PATH": "/usr/bin:/bin"}

    def new_key(self) -> tuple[str, str]:
        """A fresh age key: (the private key, its public recipient)."""
        done = subprocess.run([self.keygen], capture_output=True, check=True, env=self.env)
        private = next(x for x in done.stdout.decode().splitlines() if x.startswith("AGE-SECRET"))
        public = done.stderr.decode().split("Public key:")[1].strip()
        return private, public

    def encrypt(self, plaintext_yaml: str, recipient: str) -> str:
        """Encrypt a Secret's data as a user would (`sops -e --age ... --encrypted-regex`)."""
        argv = [str(self.sops), "--encrypt", "--age", recipient]
        argv += ["--encrypted-regex", "^(data|stringData)$", "--input-type", "yaml"]
        argv += ["--output-type", "yaml", "/dev/stdin"]
        done = subprocess.run(
            argv, input=plaintext_yaml.encode(), capture_output=True, env=self.env, cwd=self.folder
        )
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout.decode()


@pytest.fixture
def sops(testbed_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Sops:
    return Sops(testbed_binaries, tmp_path_factory.mktemp("sops-home"))


def secret(password: str) -> str:
    return f"""apiVersion: v1
kind: Secret
metadata:
  name: db
type: Opaque
stringData:
  password: {password}
"""


def _forms(text: str) -> list[bytes]:
    """The ways a value can show up: as is, and base64-encoded (a Secret's `data`)."""
    return [text.encode(), base64.b64encode(text.encode())]


def _create_app(api: TestClient, fleet: FleetEnv, app: str, cluster: str) -> None:
    body: dict[str, Any] = {
        "name": app,
        "source": {"repo": fleet.repo_url, "path": f"apps/{app}"},
        "destination": {"namespace": app, "cluster": cluster},
        "syncPolicy": {"createNamespace": True},
    }
    response = api.post("/api/v1/apps", json=body)
    assert response.status_code == 201, response.text
    fleet.created.append((app, cluster, app))


def test_an_encrypted_secret_is_applied_and_its_plaintext_is_seen_nowhere_else(
    fleet: FleetEnv,
    api: TestClient,
    sops: Sops,
    spans: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    first, second = f"first-{uuid.uuid4().hex}", f"second-{uuid.uuid4().hex}"
    age_key, recipient = sops.new_key()
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.repo.commit(
        {
            f"apps/{app}/secret.yaml": sops.encrypt(secret(first), recipient),
            f"apps/{app}/cm.yaml": m.configmap("settings"),
        }
    )
    responses: list[str] = []
    stored = api.put("/api/v1/projects/default/age-key", json={"ageKey": age_key})
    assert stored.status_code == 200, stored.text
    assert stored.json()["stored"] is True and stored.json()["keyId"]
    responses.append(stored.text)
    _create_app(api, fleet, app, cluster)
    fleet.worker_thread("alpha")

    answer = fleet.sync_and_wait(app, cluster)
    assert answer["result"] == "succeeded", answer["error"]
    live = fleet.live(cluster, ObjectRef("", "v1", "Secret", app, "db"))
    assert live is not None
    assert base64.b64decode(live["data"]["password"]).decode() == first  # decrypted and applied
    assert "sops" not in live

    # a new encrypted value: the diff says the Secret changes, and shows no value
    fleet.repo.commit({f"apps/{app}/secret.yaml": sops.encrypt(secret(second), recipient)})
    diff = api.get(f"/api/v1/apps/{app}/diff")
    assert diff.status_code == 200, diff.text
    assert diff.json()["in_sync"] is False, diff.text
    changed = [r for c in diff.json()["clusters"] for r in c["changes"] if r["kind"] == "Secret"]
    assert [(r["name"], r["action"]) for r in changed] == [("db", "configured")], diff.text
    for path in ("", "/history", "/diff"):
        response = api.get(f"/api/v1/apps/{app}{path}")
        assert response.status_code == 200, response.text
        responses.append(response.text)
    responses.append(api.get("/api/v1/projects/default/age-key").text)
    responses.append(str(answer))

    secrets = [*_forms(first), *_forms(second), age_key.encode()]
    for text in responses:
        assert not any(s in text.encode() for s in secrets), text
    logged = caplog.text + "".join(str(r.args) + str(r.msg) for r in caplog.records)
    assert f"app={app}" in logged  # the worker's own log lines were captured
    assert not any(s in logged.encode() for s in secrets)
    found_spans = spans.get_finished_spans()
    assert any(s.name == "gitfleet.render" for s in found_spans)
    for span in found_spans:
        shown = str(dict(span.attributes or {})) + str(
            [dict(e.attributes or {}) for e in span.events]
        )
        shown += span.status.description or ""
        assert not any(s in shown.encode() for s in secrets), span.name
    cached = [p for p in (fleet.folder / "cache").rglob("*") if p.is_file()]
    assert any("render" in p.parts for p in cached), cached[:5]  # the render cache is there
    for path in cached:
        data = path.read_bytes()
        assert not any(s in data for s in secrets), path


def test_a_missing_or_wrong_key_fails_the_render_naming_the_secret_and_its_file(
    fleet: FleetEnv, api: TestClient, sops: Sops
) -> None:
    _, recipient = sops.new_key()
    other_key, _ = sops.new_key()
    plaintext = f"never-{uuid.uuid4().hex}"
    app, cluster = fleet.app_name(1), sorted(fleet.clusters)[0]
    fleet.repo.commit({f"apps/{app}/secret.yaml": sops.encrypt(secret(plaintext), recipient)})
    _create_app(api, fleet, app, cluster)
    fleet.worker_thread("alpha")

    answer = fleet.sync_and_wait(app, cluster)
    assert answer["error_stage"] == "render", answer
    assert "no age key" in answer["error"] and f"apps/{app}/secret.yaml" in answer["error"]

    assert api.put("/api/v1/projects/default/age-key", json={"ageKey": other_key}).is_success
    answer = fleet.sync_and_wait(app, cluster)
    assert answer["error_stage"] == "render", answer
    assert "sops cannot decrypt" in answer["error"] and "Secret db" in answer["error"]
    assert "not one of the file's age recipients" in answer["error"]
    assert plaintext not in answer["error"] and other_key not in answer["error"]
    assert fleet.live(cluster, ObjectRef("", "v1", "Secret", app, "db")) is None


def test_the_age_key_api_refuses_what_is_not_a_key_and_never_returns_one(
    fleet: FleetEnv, api: TestClient, sops: Sops
) -> None:
    refused = api.put("/api/v1/projects/default/age-key", json={"ageKey": "hunter2"})
    assert refused.status_code == 422 and "hunter2" not in refused.text
    assert api.get("/api/v1/projects/default/age-key").json()["stored"] is False
    key, _ = sops.new_key()
    assert api.put("/api/v1/projects/default/age-key", json={"ageKey": key}).is_success
    shown = api.get("/api/v1/projects/default/age-key")
    assert shown.json()["stored"] is True and key not in shown.text
    assert api.delete("/api/v1/projects/default/age-key").status_code == 204
    assert api.get("/api/v1/projects/default/age-key").json()["stored"] is False
    assert api.get("/api/v1/projects/nowhere/age-key").status_code == 404
