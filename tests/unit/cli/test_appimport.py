"""How `gitfleet app import` cuts a file's apps into requests: by count and by JSON size."""

from __future__ import annotations

from api.appschemas import MAX_BATCH
from cli.appimport import BATCH_BYTES, batches


def test_batches_keep_file_order_and_stay_under_the_count_and_the_byte_bound() -> None:
    small = [{"name": f"a{i}"} for i in range(MAX_BATCH + 1)]
    big = [{"name": f"b{i}", "pad": "x" * (BATCH_BYTES // 3)} for i in range(4)]

    by_count = batches(small)
    by_size = batches(big)
    alone = batches([{"name": "huge", "pad": "x" * BATCH_BYTES}, {"name": "next"}])

    assert [len(b) for b in by_count] == [MAX_BATCH, 1]
    assert [b["name"] for batch in by_count for b in batch] == [a["name"] for a in small]
    assert [len(b) for b in by_size] == [2, 2]
    assert [[b["name"] for b in batch] for batch in alone] == [["huge"], ["next"]]
