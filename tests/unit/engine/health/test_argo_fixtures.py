"""`gitfleet health` agrees with every health fixture of Argo CD's gitops-engine.

`tests/data/health/argo/` holds one file per upstream case (named after the upstream fixture,
or after the test for objects built inline in `health_test.go`): our own minimal object with
the fields that decide the verdict, written for gitfleet, under a header `argo: <verdict>`
giving Argo CD's expected status (`None`: Argo CD gives the object no health). Each object goes
through `cli.health.judge`, the code behind `gitfleet health`; the verdict must be Argo CD's,
except for the documented deviations in `fleet.engine.health.deviations.ARGO_DEVIATIONS`, each
of which an app can turn off (the options that give Argo CD's verdict are checked too).
Argo CD's "no health" is gitfleet's "no health signal": Healthy with a message that says so.

The cases are those of gitops-engine's `pkg/health/health_test.go` (the last version before the
repository moved into argo-cd, snapshot 5baed56). Files in its `testdata/` that no test asserts
are not covered: `application-{missing,progressing,suspended,unknown}` (from before Argo CD
dropped the Application check) and `hpa-v2-degraded-partially` (its verdict changed with the
HPA rule's history); the one exception is the ignore-restart-policy pod, whose verdict the
pod rule gives unambiguously.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import cli.health
import cli.main
from fleet.engine.health.assess import HealthOptions
from fleet.engine.health.deviations import ARGO_DEVIATIONS
from fleet.engine.health.readers import NO_SIGNAL
from fleet.model import Health, Manifest
from tests.support.paths import DATA

FIXTURES = DATA / "health" / "argo"
CASES = sorted(FIXTURES.glob("*.yaml"))
NO_HEALTH = "None"


def load_case(path: Path) -> tuple[str, Manifest]:
    documents = list(yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader))
    assert len(documents) == 2, f"{path.name}: want the Argo CD verdict and an object"
    header, obj = documents
    argo = str(header["argo"])
    assert argo == NO_HEALTH or argo in set(Health), f"{path.name}: unknown verdict {argo}"
    return argo, obj


def agrees(argo: str, row: dict[str, str]) -> bool:
    if argo == NO_HEALTH:
        return row["health"] == Health.HEALTHY and row["message"].startswith(NO_SIGNAL)
    return row["health"] == argo


def test_there_is_one_fixture_per_upstream_case() -> None:
    # 54 fixtures health_test.go asserts, 3 Workflow objects it builds inline, and
    # pod-running-restart-never-with-ignore-annotation (in testdata; verdict from health_pod.go).
    assert len(CASES) == 58
    assert set(ARGO_DEVIATIONS) <= {p.stem for p in CASES}, "a deviation names no fixture"


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_gitfleet_health_gives_argo_cds_verdict(path: Path) -> None:
    argo, obj = load_case(path)

    [row] = cli.health.judge([obj])

    deviation = ARGO_DEVIATIONS.get(path.stem)
    if deviation is None:
        assert agrees(argo, row), f"Argo CD: {argo}; gitfleet: {row['health']}: {row['message']}"
        return
    assert not agrees(argo, row), f"{path.stem} agrees with Argo CD: drop its deviation"
    assert row["health"] == deviation.ours, row["message"]
    [chosen] = cli.health.judge([obj], HealthOptions(**deviation.argo))
    assert agrees(argo, chosen), f"{deviation.argo} does not give Argo CD's {argo}"


@pytest.mark.parametrize("name", sorted(ARGO_DEVIATIONS))
def test_every_deviation_says_why(name: str) -> None:
    deviation = ARGO_DEVIATIONS[name]

    assert len(deviation.reason) > 80
    assert deviation.argo, "every deviation is optional: name the options that give Argo CD's"
    assert set(deviation.argo) <= set(HealthOptions.__dataclass_fields__)


def test_the_command_reads_every_fixture_in_one_stream_and_agrees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole set through `gitfleet health -f FILE -o json`, as a user would run it."""
    monkeypatch.setattr(cli.main, "COMMAND_MODULES", (cli.health,))
    cases = [(path.stem, *load_case(path)) for path in CASES]
    stream = tmp_path / "argo.yaml"
    stream.write_text(yaml.safe_dump_all([obj for _, _, obj in cases]))

    code = cli.main.main(["health", "-f", str(stream), "-o", "json"])

    rows: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    assert code == 0
    assert len(rows) == len(cases)
    disagree = [
        f"{name}: Argo CD {argo}, gitfleet {row['health']}"
        for (name, argo, _), row in zip(cases, rows, strict=True)
        if not agrees(argo, row) and name not in ARGO_DEVIATIONS
    ]
    assert disagree == []
