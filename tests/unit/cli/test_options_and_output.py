"""What the `gitfleet` commands share: reading `--timeout`, and laying out a table."""

from __future__ import annotations

import pytest

from cli.options import timeout_seconds
from cli.output import table
from fleet.errors import UsageError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("1.5", 1.5), ("0", 0.0), ("90s", 90.0), ("5m", 300.0), ("1h30m", 5400.0)],
)
def test_a_timeout_is_bare_seconds_or_a_duration(text: str, seconds: float) -> None:
    assert timeout_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "m5", "1.5m", "-3s", "0s"])
def test_a_timeout_that_is_no_duration_is_a_usage_error_naming_the_option(text: str) -> None:
    with pytest.raises(UsageError) as raised:
        timeout_seconds(text)

    assert str(raised.value) == f"--timeout {text!r} is not a duration like 90s, 5m or 1h30m"


def test_a_table_pads_each_column_to_its_widest_cell_without_trailing_spaces() -> None:
    text = table([["east", "https://1.2.3.4", ""], ["west-2", "https://h", "env=prod"]],
                 ["NAME", "SERVER", "LABELS"])  # fmt: skip

    assert text.splitlines() == [
        "NAME    SERVER           LABELS",
        "east    https://1.2.3.4",
        "west-2  https://h        env=prod",
    ]


def test_a_table_without_rows_is_its_header_and_the_gap_is_chosen_by_the_caller() -> None:
    assert table([], ["KIND", "NAME"], gap="   ") == "KIND   NAME"
