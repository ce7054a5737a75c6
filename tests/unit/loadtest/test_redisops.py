"""How the bench names the Redis commands it sends, and turns a window of counts into commands
per app less the idle baseline."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from loadtest.redisops import Window, command_name, per_app


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (("GET", "key"), "get"),
        ((b"HSET", b"h", b"f", b"v"), "hset"),
        (("MULTI",), "multi"),
        (("CLIENT SETNAME", "bench"), "client|setname"),  # redis-py's one-argument form
        (("CLIENT", "SETINFO", "LIB-NAME", "redis-py"), "client|setinfo"),
        ((b"XINFO", b"STREAM", b"s"), "xinfo|stream"),
        (("EVALSHA", "abc", "0"), "evalsha"),  # not a container: its argument is no subcommand
    ],
)
def test_a_command_is_named_as_info_commandstats_files_it(args: tuple[Any, ...], name: str) -> None:
    assert command_name(args) == name


def test_commands_per_app_subtract_the_idle_rate_over_the_window_per_command_and_in_total() -> None:
    window = Window(
        commands=Counter({"hset": 400, "evalsha": 200, "blpop": 20}),
        seconds=10.0,
        raw_total=1000,
        bench_own=380,
    )
    idle = {"blpop": 2.0, "hget": 0.5}  # per second: 20 blpop and 5 hget expected over 10 s
    found = per_app(window, idle, apps=200)
    assert found["per_app"] == pytest.approx((620 - 25) / 200)
    assert found["per_app_by_command"] == {"hset": 2.0, "evalsha": 1.0}  # blpop: all idle
    assert found["idle_commands_expected"] == 25.0
    assert (found["server_commands"], found["bench_own_commands"]) == (1000, 380)
    assert found["window_s"] == 10.0


def test_a_window_quieter_than_idle_counts_zero_commands_not_fewer() -> None:
    window = Window(commands=Counter({"blpop": 3}), seconds=10.0, raw_total=5, bench_own=2)
    found = per_app(window, {"blpop": 2.0}, apps=10)
    assert found["per_app"] == 0.0
    assert found["per_app_by_command"] == {}


def test_idle_rates_are_commands_per_second_of_the_window() -> None:
    window = Window(
        commands=Counter({"blpop": 30, "set": 5}), seconds=10.0, raw_total=40, bench_own=5
    )
    assert window.rates() == Counter({"blpop": 3.0, "set": 0.5})
