"""What the render cache keeps in memory per render: the JSON, not the buffer it was written in."""

import tracemalloc

from fleet.engine.render.cache import _decode, _encode

CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "settings", "namespace": "team-a"},
    "data": {"k": "v1"},
}


def test_a_cached_one_object_render_takes_about_its_own_size() -> None:
    rendered = ((CONFIGMAP,), ("apps/a/cm.yaml",))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [_encode(rendered, "apps/a") for _ in range(200)]
        per_render = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    assert _decode(kept[0]) == rendered
    # orjson's own result held its whole 4 KB buffer; the copy is the JSON and a header
    assert per_render < len(kept[0]) + 128, per_render
