"""The fault suite's wiring and its parts that need no fleet: the command lines, the settings,
the fault table, the watch's and the records' comparisons (plain values), and the commit
stream's redelivery (a real repository on disk, a recording delivery function)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from api.client import ClientError
from loadtest import presets
from loadtest.faults import kinds
from loadtest.faults.measure import caught_up
from loadtest.faults.observe import Reading, Watch
from loadtest.faults.records import Records
from loadtest.faults.settings import FAULT_NAMES, QUICK, FaultSettings, add_arguments, resolve
from loadtest.faults.stream import CommitStream
from loadtest.workload import create_repo, plan_apps
from tests.support.paths import REPO_ROOT


def _help(*command: str) -> str:
    done = subprocess.run(
        [sys.executable, *command, "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_python_m_loadtest_faults_answers_help_with_its_options() -> None:
    text = _help("-m", "loadtest.faults")
    for option in ("--out", "--quick", "--outage", "--fault", "--clusters-json"):
        assert option in text
    assert "faults.json" in text


def test_gitfleet_bench_offers_the_faults_preset_and_its_options() -> None:
    text = _help("-m", "cli.main", "bench")
    assert "faults" in text and "--quick" in text and "--fault" in text


def test_the_bench_parser_resolves_the_faults_preset_to_quick_settings() -> None:
    parser = argparse.ArgumentParser()
    presets.add_arguments(parser)
    args = parser.parse_args(["--out", "x", "--preset", "faults", "--quick", "--apps", "8"])
    settings = resolve(args)
    assert settings.quick and settings.apps == 8 and settings.outage_s == QUICK.outage_s
    assert settings.pause_s > settings.lease_ttl_s  # paused past its lease, as the issue says


def test_the_defaults_are_the_issues_durations() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    settings = resolve(parser.parse_args(["--out", "x"]))
    assert settings == FaultSettings()
    assert settings.outage_s == 60.0 and settings.apps >= 200


def test_one_worker_is_refused_a_fault_takes_one_away() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit, match="workers"):
        resolve(parser.parse_args(["--out", "x", "--workers", "1"]))


def test_the_table_has_every_fault_of_the_issue_and_refuses_an_unknown_name() -> None:
    assert kinds.NAMES == FAULT_NAMES
    assert [f.name for f in kinds.chosen(("git-outage", "api-kill"))] == ["api-kill", "git-outage"]
    with pytest.raises(SystemExit, match="unknown fault"):
        kinds.chosen(("meteor-strike",))


def _reading(values: dict[str, dict[int, int]], *down: str) -> Reading:
    return Reading(values, frozenset(down))


def test_the_watch_reports_a_value_that_goes_back_and_an_object_that_vanishes() -> None:
    watch = Watch({}, "ns", {"a": "c1", "b": "c1", "c": "c2"})
    watch.observe(_reading({"a": {0: 5, 1: 0}, "b": {0: 3, 1: 0}, "c": {0: 1}}), at=1.0)
    watch.observe(_reading({"a": {0: 4, 1: 0}, "b": {0: 7}}, "c2"), at=2.0)  # c2 unreachable
    found = {(e.kind, e.app, e.index, e.before, e.after) for e in watch.events}
    assert found == {("regressed", "a", 0, 5, 4), ("vanished", "b", 1, 0, -1)}
    assert watch.between(1.5, 3.0) == watch.events and watch.between(0, 1.5) == []


def test_caught_up_needs_every_app_at_least_at_its_target() -> None:
    reading = _reading({"a": {0: 5}, "b": {0: 2}})
    assert caught_up(reading, {"a": 5, "b": 1})
    assert not caught_up(reading, {"a": 6, "b": 1})
    assert not caught_up(reading, {"c": 0})  # absent: -1


def test_records_lost_are_the_names_gone_since() -> None:
    before = Records({"apps": frozenset({"a", "b"}), "tokens": frozenset({"t"})})
    after = Records({"apps": frozenset({"a", "c"}), "tokens": frozenset({"t"})})
    assert after.lost_since(before) == {"apps": ["b"]}
    assert after.counts() == {"apps": 2, "tokens": 1}


def test_records_are_known_by_the_name_inside_each_export_entry() -> None:
    document = {
        "apps": [{"record": {"name": "shop", "uid": "u1"}, "credentials": None}],
        "tokens": [{"digest": "d1", "record": {"name": "ci", "role": "member"}}],
    }
    records = Records.of(document)
    assert records.names["apps"] == {"shop"} and records.names["tokens"] == {"ci"}
    assert records.names["clusters"] == frozenset()


def test_the_stream_keeps_a_refused_delivery_and_sends_its_paths_with_the_next(
    tmp_path: Path,
) -> None:
    apps = plan_apps("s", 3, ["c1"])
    create_repo(tmp_path / "repo", apps, 1)
    sent: list[dict[str, Any]] = []
    refuse = [True]

    def deliver(event: dict[str, Any]) -> None:
        if refuse[0]:
            raise ClientError("the API is down")
        sent.append(event)

    stream = CommitStream(
        repo=tmp_path / "repo",
        repo_url="http://127.0.0.1:1/bench.git",
        apps=apps,
        per_app=1,
        every_s=1.0,
        deliver=deliver,
    )
    stream.tick()
    assert stream.counts.refused == 1 and stream.undelivered() and not sent
    refuse[0] = False
    stream.pause()
    stream.tick()  # paused: no commit, but the refused paths go out
    assert stream.counts.commits == 1 and not stream.undelivered()
    assert sent[0]["commits"][0]["modified"] == ["apps/s-00001/cm-0.yaml"]
    stream.resume()
    stream.tick()
    assert stream.newest() == {"s-00000": 0, "s-00001": 1, "s-00002": 2}
    assert sent[1]["before"] == sent[0]["after"]  # each delivery starts where the last ended
