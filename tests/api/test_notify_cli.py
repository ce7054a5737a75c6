"""`gitfleet notify add|list|deliveries|delete` against the coordinator over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.api.test_cli_client import Served, served  # noqa: F401 (the fixture)


def test_notify_commands_manage_a_subscription_and_never_show_its_secret(
    served: Served,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    secret = tmp_path / "hook.secret"
    secret.write_text("cli-hmac-secret\n")
    url = "https://hooks.example.com/gitfleet/path-token"
    code, out, err = served.run(
        capsys,
        *("notify", "add", "ops", "--project", "default", "--url", url),
        *("--event", "sync-failed", "--event", "recovered", "--secret-file", str(secret)),
    )
    assert code == 0, err
    assert "sync-failed, recovered of project default" in out and "path-token" not in out

    code, out, err = served.run(capsys, "notify", "list", "-o", "json")
    assert code == 0, err
    (listed,) = json.loads(out)
    assert (listed["name"], listed["kind"], listed["hasSecret"]) == ("ops", "webhook", True)
    assert "cli-hmac-secret" not in out and "path-token" not in out

    code, out, err = served.run(capsys, "notify", "deliveries", "ops", "-o", "json")
    assert (code, json.loads(out)) == (0, [])

    code, out, err = served.run(
        capsys, "notify", "add", "bad", "--project", "default", "--url", "http://10.0.0.1/x",
        "--secret-file", str(secret),
    )  # fmt: skip
    assert code != 0 and "plain http" in err

    code, out, err = served.run(capsys, "notify", "delete", "ops")
    assert (code, out.strip()) == (0, "subscription ops deleted")
    code, out, err = served.run(capsys, "notify", "list", "-o", "json")
    assert json.loads(out) == []
