"""`gitfleet app import -f FILE` against the coordinator over real HTTP: apps from a
multi-document YAML file, sent in batches; a refused batch names the app and keeps the batches
created before it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from api.appschemas import MAX_BATCH
from cli.main import main
from deploy.testbed.process import free_port
from tests.api.test_cli_client import Served, add_east, kubeconfig, served  # noqa: F401


@pytest.fixture
def east(
    served: Served,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    kubeconfig: Path,  # noqa: F811
) -> Served:
    """The coordinator with cluster `east` registered."""
    add_east(served, capsys, kubeconfig)
    return served


def body(name: str, **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "source": {"repo": "https://git.example.com/team/shop.git", "path": name},
        "destination": {"cluster": "east", "namespace": "shop"},
        **extra,
    }


def test_import_creates_apps_from_documents_and_lists_in_file_order(
    east: Served, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    first = [body(f"app-{i:03}") for i in range(MAX_BATCH)]
    second = [body("db"), body("shop", dependsOn=["db", "app-000"])]
    path = tmp_path / "apps.yaml"
    path.write_text(yaml.safe_dump_all([first, *second, None]))

    code, out, err = east.run(capsys, "app", "import", "-f", str(path))

    assert code == 0, err
    assert out.splitlines() == [f"{MAX_BATCH}/{MAX_BATCH + 2} apps created", "502/502 apps created"]
    registered = {a.name for a in east.store.list_apps()}
    assert registered == {b["name"] for b in [*first, *second]}
    assert east.store.get_app("shop").depends_on == ("db", "app-000")


def test_a_refused_batch_names_the_app_and_keeps_the_batches_before_it(
    east: Served, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    apps = [body(f"app-{i:03}") for i in range(MAX_BATCH)]
    apps += [body("ok"), body("bad", destination={"cluster": "nowhere", "namespace": "x"})]
    path = tmp_path / "apps.yaml"
    path.write_text(yaml.safe_dump(apps))

    code, out, err = east.run(capsys, "app", "import", "-f", str(path))

    assert code == 2
    assert out.splitlines() == [f"{MAX_BATCH}/{MAX_BATCH + 2} apps created"]
    assert f"apps {MAX_BATCH + 1}-{MAX_BATCH + 2} of the file was refused" in err
    assert "apps.1 (bad): destination.cluster: no cluster named nowhere" in err
    assert f"{MAX_BATCH} app(s) created before it" in err
    names = {a.name for a in east.store.list_apps()}
    assert len(names) == MAX_BATCH and "ok" not in names


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: [unclosed", "not YAML or JSON at line 1, column 16"),
        ("password: s3cr3t: x\n", "not YAML or JSON at line 1, column 17"),
        ("- just a string\n", "document 1, app 1 of the file: not an app body"),
        ("---\n", "no app in the file"),
        ("name: a\nsource: {revision: 2024-01-01}\n", "quote dates and times"),
        ('{"name": "a", "x": NaN}', "document 1, app 1 of the file: a value JSON cannot carry"),
        ('[{"name": "\\ud83d"}]', "a value JSON cannot carry"),
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

    assert code == 2 and message in err, err
    assert "s3cr3t" not in err
    assert served.store.list_apps() == []


def test_the_batch_endpoints_own_body_is_read_and_json_output_lists_the_created_apps(
    east: Served, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "batch.json"
    path.write_text(json.dumps({"apps": [body("one"), body("two")]}))

    code, out, err = east.run(capsys, "app", "import", "-f", str(path), "-o", "json")

    assert code == 0, err
    assert json.loads(out) == {"created": ["one", "two"]}


def test_tab_indented_json_is_read_and_an_unanswered_batch_is_not_called_refused(
    east: Served, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "apps.json"
    path.write_text(json.dumps([body("tabbed")], indent="\t"))

    code, out, err = east.run(capsys, "app", "import", "-f", str(path))
    assert code == 0, err
    assert out.splitlines() == ["1/1 apps created"]
    unanswered = main(
        [
            "app",
            "import",
            "-f",
            str(path),
            "--server",
            f"http://127.0.0.1:{free_port()}",
            "--token",
            "t",
        ]
    )
    err = capsys.readouterr().err

    assert unanswered == 2
    assert (
        "no answer for the batch of apps 1-1 of the file, which may or may not have been created"
        in err
    )
    assert "refused" not in err
