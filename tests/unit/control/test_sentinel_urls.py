"""Sentinel URLs in `fleet.control.connection`: what is read from them, and malformed ones
refused before anything is contacted."""

from __future__ import annotations

import pytest

from fleet.control.connection import RedisUnavailable, connect, is_sentinel, redacted


def test_only_the_sentinel_scheme_is_read_as_sentinels() -> None:
    assert is_sentinel("redis+sentinel://h:26379/m/0")
    assert not is_sentinel("redis://h:6379/0")
    assert not is_sentinel("rediss://h:6380/0")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://:pw@h1:26379,h2:26379", "MASTER_NAME"),
        ("redis+sentinel://:pw@h1:port/mymaster/0", "sentinel 'h1:port' is not HOST:PORT"),
        ("redis+sentinel://:pw@h1:26379/mymaster/zero", "the database 'zero' is not a number"),
        ("redis+sentinel://:pw@h1:26379/a/0/extra", "MASTER_NAME"),
    ],
)
def test_a_malformed_sentinel_url_is_a_clear_error_without_its_password(
    url: str, says: str
) -> None:
    with pytest.raises(RedisUnavailable, match="is not a Redis URL") as error:
        connect(url)
    assert says in str(error.value)
    assert ":pw@" not in str(error.value)


def test_the_password_of_a_sentinel_url_is_redacted() -> None:
    url = "redis+sentinel://:s3cret@h1:26379,h2:26379/mymaster/0"
    assert redacted(url) == "redis+sentinel://:***@h1:26379,h2:26379/mymaster/0"
