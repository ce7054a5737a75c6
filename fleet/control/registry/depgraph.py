"""Dependency cycles among apps, found in one walk however many apps are being written.

`find_cycle` walks depth first from each start, visiting every app once across all starts (a
batch of 500 apps that each depend on all the earlier ones costs one visit per edge, not one
walk per app), and keeps the current path as a stack instead of copying it per step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence


def find_cycle(starts: Iterable[str], depends_on: Callable[[str], Sequence[str]]) -> list[str]:
    """A dependency path reachable from `starts` that comes back to where it began
    (`[a, b, a]`), or [] when there is none. `depends_on` is called once per app reached."""
    finished: set[str] = set()
    for start in starts:
        if start in finished:
            continue
        path, on_path = [start], {start}
        pending: list[Iterator[str]] = [iter(depends_on(start))]
        while pending:
            name = next(pending[-1], None)
            if name is None:
                done = path.pop()
                on_path.discard(done)
                finished.add(done)
                pending.pop()
            elif name in on_path:
                return [*path[path.index(name) :], name]
            elif name not in finished:
                path.append(name)
                on_path.add(name)
                pending.append(iter(depends_on(name)))
    return []
