"""`--profile` on `gitfleet bench`: off unless asked, and carried into the run's parameters."""

from __future__ import annotations

import argparse

from loadtest.presets import add_arguments, resolve


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--out", "/tmp/unused", *argv])


def test_a_bench_profiles_only_when_asked_and_says_so_in_its_parameters() -> None:
    assert resolve(parse()).profile is False
    params = resolve(parse("--profile", "--preset", "large"))
    assert params.profile is True
    assert params.to_json()["profile"] is True and params.apps == 10_000
