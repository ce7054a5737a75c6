"""`gitfleet health` through the real entry point, `cli.main.main`."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

import cli.health
import cli.main

Gitfleet = Callable[[Sequence[str]], int]

LIVE_OBJECTS = """\
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: cart, namespace: shop, generation: 2}
  spec: {replicas: 2}
  status: {observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 1}
- apiVersion: v1
  kind: Namespace
  metadata: {name: shop}
  status: {phase: Active}
---
# a second document, as in a multi-document file
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: demo}
"""

EXPECTED = [
    {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "namespace": "shop",
        "name": "cart",
        "health": "Progressing",
        "message": "rollout in progress: 1 of 2 updated replicas available",
    },
    {
        "apiVersion": "v1",
        "kind": "Namespace",
        "namespace": "",
        "name": "shop",
        "health": "Healthy",
        "message": "active",
    },
    {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "namespace": "demo",
        "name": "w1",
        "health": "Unknown",
        "message": "no controller has reported status for Widget/demo/w1",
    },
]


@pytest.fixture
def gitfleet(monkeypatch: pytest.MonkeyPatch) -> Gitfleet:
    """`cli.main.main` with only this command registered, so other commands cannot break it."""
    monkeypatch.setattr(cli.main, "COMMAND_MODULES", (cli.health,))
    return cli.main.main


def write(tmp_path: Path, text: str, name: str = "live.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_json_output_lists_every_object_of_lists_and_documents_with_its_health(
    gitfleet: Gitfleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = gitfleet(["health", "-f", write(tmp_path, LIVE_OBJECTS), "-o", "json"])

    assert code == 0
    assert json.loads(capsys.readouterr().out) == EXPECTED


def test_text_output_is_an_aligned_table_with_one_row_per_object(
    gitfleet: Gitfleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = gitfleet(["health", "-f", write(tmp_path, LIVE_OBJECTS)])

    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[0].split() == ["KIND", "NAMESPACE", "NAME", "HEALTH", "MESSAGE"]
    assert lines[1].split()[:4] == ["Deployment", "shop", "cart", "Progressing"]
    assert lines[3].split()[:4] == ["Widget", "demo", "w1", "Unknown"]
    assert lines[3].endswith("no controller has reported status for Widget/demo/w1")
    health_column = lines[0].index("HEALTH")
    assert [line[health_column:].split()[0] for line in lines[1:]] == [
        "Progressing",
        "Healthy",
        "Unknown",
    ]


def test_dash_reads_objects_from_standard_input(
    gitfleet: Gitfleet, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(LIVE_OBJECTS))

    code = gitfleet(["health", "-f", "-", "-o", "json"])

    assert code == 0
    assert [row["name"] for row in json.loads(capsys.readouterr().out)] == ["cart", "shop", "w1"]


def test_malformed_yaml_exits_2_naming_the_file_and_line(
    gitfleet: Gitfleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x\ndata: {}\n")

    code = gitfleet(["health", "-f", path])

    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err.startswith(f"error: {path}: malformed YAML at line 5, column ")
    assert "Traceback" not in captured.err


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("- a\n- b\n", "document at line 1: expected a Kubernetes object, found a list"),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: Secret\n",
            "document at line 5: not a Kubernetes object, missing apiVersion, metadata.name",
        ),
        (
            "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Pod}]\n",
            "document at line 1, item 1: not a Kubernetes object, missing metadata.name",
        ),
    ],
    ids=["sequence", "no-apiversion-or-name", "list-item-without-name"],
)
def test_a_document_that_is_not_an_object_exits_2_saying_where(
    gitfleet: Gitfleet,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    complaint: str,
) -> None:
    path = write(tmp_path, text)

    code = gitfleet(["health", "-f", path])

    assert code == 2
    assert capsys.readouterr().err == f"error: {path}: {complaint}\n"


def test_a_typed_list_from_the_api_gives_its_items_their_kind(
    gitfleet: Gitfleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "apiVersion: v1\nkind: ConfigMapList\nitems: [{metadata: {name: a, namespace: n}}]\n"

    code = gitfleet(["health", "-f", write(tmp_path, text), "-o", "json"])

    assert code == 0
    [row] = json.loads(capsys.readouterr().out)
    assert (row["apiVersion"], row["kind"], row["health"]) == ("v1", "ConfigMap", "Healthy")


def test_a_missing_file_exits_2_naming_it(
    gitfleet: Gitfleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "absent.yaml")

    code = gitfleet(["health", "-f", path])

    assert code == 2
    assert capsys.readouterr().err == f"error: {path}: no such file\n"


CUSTOM_RESOURCES = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: settings.example.com}
spec:
  group: example.com
  names: {kind: Setting, plural: settings}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true}]
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true, subresources: {status: {}}}]
---
apiVersion: example.com/v1
kind: Setting
metadata: {name: s1, namespace: demo}
spec: {level: 3}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: demo}
spec: {size: 3}
"""


def test_crds_in_the_input_tell_no_health_signal_from_waiting_for_a_controller(
    gitfleet: Gitfleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = gitfleet(["health", "-f", write(tmp_path, CUSTOM_RESOURCES), "-o", "json"])

    assert code == 0
    rows = {row["kind"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["Setting"]["health"] == "Healthy"
    assert rows["Setting"]["message"].startswith("no health signal: Setting/demo/s1 reports")
    assert rows["Widget"]["health"] == "Unknown"
    assert "declares a status subresource" in rows["Widget"]["message"]


INGRESS = """\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: shop}
spec: {rules: [{host: shop.example.com}]}
"""


@pytest.mark.parametrize(
    ("flags", "health", "says"),
    [
        ([], "Healthy", "Healthy without one by gitfleet's default"),
        (["--ingress-needs-address"], "Progressing", "waiting for the ingress controller"),
    ],
    ids=["default", "needs-address"],
)
def test_an_ingress_without_an_address_says_which_rule_judged_it(
    gitfleet: Gitfleet,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    health: str,
    says: str,
) -> None:
    code = gitfleet(["health", "-f", write(tmp_path, INGRESS), *flags])

    assert code == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert row.split()[:4] == ["Ingress", "shop", "shop", health]
    assert says in row
