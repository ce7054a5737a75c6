"""The one transaction every registry write goes through, and the timestamp records carry.

`transact` guards a write with the registry generation (`Keys.generation`): WATCH it, check,
then write and bump it in one MULTI/EXEC, so no check can be overtaken by a concurrent write.
`now` is the UTC timestamp, to the second, that records, tokens and statuses are stamped with.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from redis import Redis, WatchError
from redis.client import Pipeline

from fleet.control.keys import Keys
from fleet.control.registry.errors import Conflict

_ATTEMPTS = 5


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def transact(
    redis: Redis, keys: Keys, check: Callable[[], None], write: Callable[[Pipeline], None]
) -> None:
    """Run `check`, then `write` and a generation bump in one MULTI/EXEC; re-run on a race.

    `check` reads through the ordinary client after the WATCH, so any registry write that lands
    between the check and EXEC bumps the generation and makes EXEC refuse the whole write.
    """
    for _ in range(_ATTEMPTS):
        with redis.pipeline() as pipe:
            try:
                pipe.watch(keys.generation)  # type: ignore[no-untyped-call]
                check()
                pipe.multi()
                write(pipe)
                pipe.incr(keys.generation)
                pipe.execute()
                return
            except WatchError:
                continue
    raise Conflict("the registry kept changing while this request ran; retry it")
