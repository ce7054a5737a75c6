"""The CLI of per-cluster values and SOPS keys, against the coordinator over real HTTP:
`app create|set --param`, `--no-post-build`, and `project age-key set|show|delete`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.api.test_cli_client import (  # noqa: F401
    Served,
    add_east,
    create_shop_on_east,
    kubeconfig,
    served,
)

KEY = "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ"


def test_app_parameters_are_set_merged_and_turned_off(
    served: Served,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    kubeconfig: Path,  # noqa: F811
) -> None:
    add_east(served, capsys, kubeconfig)
    create_shop_on_east(served, capsys, "--param", "tier=gold", "--param", "replicas=2")
    record = served.store.get_app("shop")
    assert record.post_build is not None
    assert record.post_build.substitute == {"tier": "gold", "replicas": "2"}
    code, _, err = served.run(capsys, "app", "set", "shop", "--param", "tier=silver")
    assert code == 0, err
    record = served.store.get_app("shop")
    assert record.post_build is not None
    assert record.post_build.substitute == {"tier": "silver", "replicas": "2"}
    code, _, err = served.run(capsys, "app", "set", "shop", "--no-post-build")
    assert code == 0, err
    assert served.store.get_app("shop").post_build is None
    code, _, err = served.run(
        capsys, "app", "create", "bad", "--repo", "https://git.example.com/shop.git",
        "--path", "deploy", "--cluster", "east", "--namespace", "shop", "--param", "9x=1",
    )  # fmt: skip
    assert code != 0 and "9x" in err


def test_project_age_key_is_stored_shown_by_id_only_and_deleted(
    served: Served,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    key_file = tmp_path / "key.txt"
    key_file.write_text(f"# created: now\n# public key: age1xyz\n{KEY}\n")
    code, out, err = served.run(
        capsys, "project", "age-key", "set", "default", "--key-file", str(key_file)
    )
    assert code == 0, err
    assert "project default: age key" in out and KEY not in out + err
    assert served.store.age_keys.key_for("default") == KEY
    code, out, _ = served.run(capsys, "project", "age-key", "show", "default", "-o", "json")
    assert code == 0 and '"stored": true' in out and KEY not in out
    code, out, _ = served.run(capsys, "project", "age-key", "delete", "default")
    assert code == 0 and "deleted" in out
    assert served.store.age_keys.key_for("default") == ""
    key_file.write_text("not a key\n")
    code, _, err = served.run(
        capsys, "project", "age-key", "set", "default", "--key-file", str(key_file)
    )
    assert code != 0 and "not an age private key" in err
