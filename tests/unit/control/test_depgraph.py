"""Dependency cycles: found from any start, each app's dependencies read once in all."""

from __future__ import annotations

from collections import Counter

from fleet.control.registry.depgraph import find_cycle


def walk(graph: dict[str, list[str]], starts: list[str]) -> tuple[list[str], Counter[str]]:
    reads: Counter[str] = Counter()

    def depends_on(name: str) -> list[str]:
        reads[name] += 1
        return graph.get(name, [])

    return find_cycle(starts, depends_on), reads


def test_a_cycle_is_reported_as_the_path_back_to_where_it_began() -> None:
    graph = {"db": ["shop"], "shop": ["cache"], "cache": ["db"], "web": ["db"]}

    assert walk(graph, ["web"])[0] == ["db", "shop", "cache", "db"]
    assert walk(graph, ["db"])[0] == ["db", "shop", "cache", "db"]
    assert walk({"a": ["a"]}, ["a"])[0] == ["a", "a"]


def test_shared_dependencies_make_no_cycle_and_unknown_names_are_leaves() -> None:
    diamond = {"top": ["left", "right"], "left": ["base"], "right": ["base"], "base": ["gone"]}

    assert walk(diamond, ["top", "left"])[0] == []


def test_a_dense_batch_reads_each_app_once_however_many_starts_reach_it() -> None:
    names = [f"app-{i}" for i in range(300)]
    graph = {name: names[:i] for i, name in enumerate(names)}  # each on every earlier one

    cycle, reads = walk(graph, names)

    assert cycle == []
    assert set(reads.values()) == {1} and len(reads) == len(names)
