"""`gitfleet app import -f FILE` against the coordinator over real HTTP: apps from a
multi-document YAML file, sent in batches; a refused batch names the app and keeps the batches
created before it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from api.appschemas import MAX_BATCH
from tests.api.test_cli_client import Served, add_east, kubeconfig, served  # noqa: F401


def body(name: str, **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "source": {"repo": "https://git.example.com/team/shop.git", "path": name},
        "destination": {"cluster": "east", "namespace": "shop"},
        **extra,
    }


def test_import_creates_apps_from_documents_and_lists_in_file_order(
    served: Served,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    kubeconfig: Path,  # noqa: F811
) -> None:
    add_east(served, capsys, kubeconfig)
    first = [body(f"app-{i:03}") for i in range(MAX_BATCH)]
    second = [body("db"), body("shop", dependsOn=["db", "app-000"])]
    path = tmp_path / "apps.yaml"
    path.write_text(yaml.safe_dump_all([first, *second, None]))

    code, out, err = served.run(capsys, "app", "import", "-f", str(path))

    assert code == 0, err
    assert out.splitlines() == [f"{MAX_BATCH}/{MAX_BATCH + 2} apps created", "502/502 apps created"]
    registered = {a.name for a in served.store.list_apps()}
    assert registered == {b["name"] for b in [*first, *second]}
    assert served.store.get_app("shop").depends_on == ("db", "app-000")


def test_a_refused_batch_names_the_app_and_keeps_the_batches_before_it(
    served: Served,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    kubeconfig: Path,  # noqa: F811
) -> None:
    add_east(served, capsys, kubeconfig)
    apps = [body(f"app-{i:03}") for i in range(MAX_BATCH)]
    apps += [body("ok"), body("bad", destination={"cluster": "nowhere", "namespace": "x"})]
    path = tmp_path / "apps.yaml"
    path.write_text(yaml.safe_dump(apps))

    code, out, err = served.run(capsys, "app", "import", "-f", str(path))

    assert code == 2
    assert out.splitlines() == [f"{MAX_BATCH}/{MAX_BATCH + 2} apps created"]
    assert f"apps {MAX_BATCH + 1}-{MAX_BATCH + 2} of the file was refused" in err
    assert "apps.1 (bad): destination.cluster: no cluster named nowhere" in err
    assert f"{MAX_BATCH} app(s) created before it" in err
    names = {a.name for a in served.store.list_apps()}
    assert len(names) == MAX_BATCH and "ok" not in names


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: [unclosed", "not YAML or JSON"),
        ("- just a string\n", "document 1: give app bodies"),
        ("---\n", "no app in the file"),
    ],
)
def test_a_file_that_holds_no_app_bodies_is_refused_before_any_request(
    served: Served,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    text: str,
    message: str,
) -> None:
    path = tmp_path / "apps.yaml"
    path.write_text(text)

    code, _, err = served.run(capsys, "app", "import", "-f", str(path))

    assert code == 2 and message in err
    assert served.store.list_apps() == []
