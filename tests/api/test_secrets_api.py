"""No credential ever leaves through a response or a log line, and none is stored in clear."""

from __future__ import annotations

import base64
import logging

import pytest
import redis
from cryptography.fernet import Fernet
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fleet.control.keys import Keys
from fleet.control.registry.secrets import SecretBox, SecretError, key_from
from fleet.control.registry.store import Store
from tests.api.conftest import ADMIN_TOKEN, WEBHOOK_SECRET, Api, app_body, fake_kubeconfig

KUBE_TOKEN = "kube-token-4f0c2a9e7d"
SERVER_TOKEN = "server-token-9b1e77c3aa"
GIT_PASSWORD = "git-password-31d5e0f2bb"
CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


def exercise_every_route(api: Api) -> list[str]:
    """Drive the API through successes and failures that all carry credentials."""
    c = api.client
    ca_data = base64.b64encode(CA_PEM.encode()).decode()
    creds = {"username": "bot", "password": GIT_PASSWORD}
    responses = [
        c.post(
            "/api/v1/clusters", json={"name": "east", "kubeconfig": fake_kubeconfig(KUBE_TOKEN)}
        ),
        c.post(
            "/api/v1/clusters", json={"name": "east", "kubeconfig": fake_kubeconfig(KUBE_TOKEN)}
        ),
        c.post(
            "/api/v1/clusters", json={"name": "bad", "kubeconfig": f"a: [\n token: {KUBE_TOKEN}"}
        ),
        c.post("/api/v1/clusters", json={"name": "BAD", "kubeconfig": fake_kubeconfig(KUBE_TOKEN)}),
        c.post(
            "/api/v1/clusters",
            json={
                "name": "west",
                "server": "https://10.0.0.9",
                "token": SERVER_TOKEN,
                "caData": ca_data,
            },
        ),
        c.post(
            "/api/v1/clusters",
            json={"name": "x", "server": "https://y", "token": SERVER_TOKEN, "caData": "@@"},
        ),
        c.post("/api/v1/apps", json=app_body("shop", credentials=creds)),
        c.post("/api/v1/apps", json=app_body("leaky", credentials={"password": 42})),
        c.post(
            "/api/v1/apps", json=app_body("leaky", credentials={**creds, "extra": GIT_PASSWORD})
        ),
        c.post(
            "/api/v1/apps",
            json=app_body(
                "leaky", source={"repo": f"https://bot:{GIT_PASSWORD}@git.example.com/x.git"}
            ),
        ),
        c.put("/api/v1/apps/shop", json=app_body("shop", credentials=creds)),
        c.post("/api/v1/apps/shop/sync"),
        c.get("/api/v1/apps/shop/diff"),
        c.post("/api/v1/webhooks/git", content=b"{}", headers={"X-Hub-Signature-256": "sha256=00"}),
    ]
    responses += [
        c.get(path)
        for path in (
            "/api/v1/clusters",
            "/api/v1/clusters/east",
            "/api/v1/clusters/west",
            "/api/v1/apps",
            "/api/v1/apps/shop",
            "/api/v1/apps/shop/history",
            "/api/v1/projects",
            "/api/v1/tokens",
            "/metrics",
            "/openapi.json",
        )
    ]
    responses.append(c.delete("/api/v1/clusters/west"))
    return [f"{r.status_code} {r.headers} {r.text}" for r in responses]


def test_no_credential_appears_in_any_response_log_line_or_span(
    api: Api, caplog: pytest.LogCaptureFixture, spans: InMemorySpanExporter
) -> None:
    caplog.set_level(logging.DEBUG)
    spans.clear()

    answers = exercise_every_route(api)

    assert any(a.startswith("201") for a in answers) and any(a.startswith("422") for a in answers)
    logged = caplog.text + "\n".join(r.getMessage() for r in caplog.records)
    traced = "\n".join(s.to_json() for s in spans.get_finished_spans())
    assert "gitfleet.api.manual" in traced
    for secret in (KUBE_TOKEN, SERVER_TOKEN, GIT_PASSWORD, ADMIN_TOKEN, WEBHOOK_SECRET):
        for answer in answers:
            assert secret not in answer
        assert secret not in logged
        assert secret not in traced
    assert api.store.git_credentials("shop") is not None


def test_credentials_are_encrypted_at_rest_and_need_the_key_to_be_read(
    api: Api, redis_url: str
) -> None:
    exercise_every_route(api)
    connection = redis.Redis.from_url(redis_url)

    stored = b"".join(connection.dump(key) or b"" for key in connection.keys("*"))

    for secret in (KUBE_TOKEN, SERVER_TOKEN, GIT_PASSWORD, ADMIN_TOKEN):
        assert secret.encode() not in stored
    assert api.store.cluster_config("east").token == KUBE_TOKEN
    other_key = Store(connection, SecretBox.from_setting(Fernet.generate_key().decode()))
    with pytest.raises(SecretError, match="GITFLEET_SECRET_KEY differs"):
        other_key.cluster_config("east")


def test_a_rotated_key_list_still_reads_what_the_old_key_wrote(api: Api, redis_url: str) -> None:
    exercise_every_route(api)
    from tests.api.conftest import SECRET_KEY

    rotated = SecretBox.from_setting(f"{Fernet.generate_key().decode()},{SECRET_KEY}")
    store = Store(redis.Redis.from_url(redis_url), rotated)

    assert store.cluster_config("east").token == KUBE_TOKEN


def test_a_passphrase_setting_derives_a_stable_fernet_key() -> None:
    box = SecretBox.from_setting("correct horse battery staple")
    again = SecretBox.from_setting("correct horse battery staple")

    assert again.decrypt(box.encrypt("s3cret")) == "s3cret"
    assert key_from("correct horse battery staple") != b"correct horse battery staple"
    generated = Fernet.generate_key()
    assert key_from(generated.decode()) == generated


def test_without_a_key_setting_the_box_refuses_to_open_and_keeps_no_key_in_redis(
    redis_url: str,
) -> None:
    connection = redis.Redis.from_url(redis_url)

    with pytest.raises(SecretError, match=r"GITFLEET_SECRET_KEY is not set.*--insecure-dev"):
        SecretBox.open(None, connection)

    assert connection.get(Keys().secret_key) is None


def test_with_insecure_dev_and_no_key_setting_the_key_is_kept_in_redis_and_a_warning_logged(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    import fleet.control.registry.secrets

    fleet.control.registry.secrets._warned.clear()
    connection = redis.Redis.from_url(redis_url)
    caplog.set_level(logging.WARNING)

    first = SecretBox.open(None, connection, insecure_dev=True)
    second = SecretBox.open("", connection, insecure_dev=True)

    assert second.decrypt(first.encrypt("x")) == "x"
    stored = connection.get(Keys().secret_key)
    assert isinstance(stored, bytes)
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "GITFLEET_SECRET_KEY is unset" in caplog.text
    assert stored.decode() not in caplog.text


def test_settings_come_from_the_environment_and_never_print_their_secrets() -> None:
    from api.settings import Settings

    env = {
        "GITFLEET_REDIS_URL": "redis://r:6379/3",
        "GITFLEET_ADMIN_TOKEN": ADMIN_TOKEN,
        "GITFLEET_SECRET_KEY": "passphrase",
        "GITFLEET_WEBHOOK_SECRET": WEBHOOK_SECRET,
    }

    settings = Settings.from_env(env)

    assert settings.redis_url == "redis://r:6379/3"
    assert Settings.reveal(settings.admin_token) == ADMIN_TOKEN
    for secret in (ADMIN_TOKEN, "passphrase", WEBHOOK_SECRET):
        assert secret not in repr(settings) and secret not in str(settings.model_dump())
