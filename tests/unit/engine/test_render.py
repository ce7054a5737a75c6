"""Plain rendering, object validation and the render cache, over small git repos in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.engine.render.cache import Renderer
from fleet.engine.render.job import RenderParams
from fleet.engine.render.manifests import parse_manifests
from fleet.engine.source.cache import SourceCache
from fleet.errors import RenderError
from tests.support.gitrepo import GitRepo


def cm(name: str, **data: str) -> str:
    body = "".join(f"\n  {k}: {v!r}" for k, v in data.items()) or " {}"
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:{body}\n"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo.create(tmp_path / "repo")


def render_names(renderer: Renderer, source: SourceCache, repo: GitRepo, path: str) -> list[str]:
    result = renderer.render(source, source.resolve(repo.url), path, RenderParams())
    return [obj["metadata"]["name"] for obj in result.objects]


def test_plain_renders_yaml_and_json_recursively_in_path_order_skipping_other_files(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    json_cm = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-json"}}'
    repo.commit(
        {
            "app/b.yaml": cm("b1") + "---\n---\n" + cm("b2"),
            "app/a.yml": cm("a"),
            "app/sub/c.json": json_cm,
            "app/notes.txt": "not: [a manifest",
            "app/README.md": "# ignored",
            "app/.github/workflows/ci.yaml": "on: push\n",
            "app/.pre-commit-config.yaml": "repos: []\n",
            "other/x.yaml": cm("outside"),
        }
    )
    result = renderer.render(source, source.resolve(repo.url), "app", RenderParams())
    assert [o["metadata"]["name"] for o in result.objects] == ["a", "b1", "b2", "from-json"]
    assert result.renderer == "plain"
    assert result.cached is False


def test_a_list_is_expanded_into_its_items() -> None:
    doc = f"apiVersion: v1\nkind: List\nitems:\n- {cm('one').replace(chr(10), chr(10) + '  ')}"
    objects = parse_manifests("list.yaml", doc.encode() + b"\n" + b"---\n" + cm("two").encode())
    assert [o["metadata"]["name"] for o in objects] == ["one", "two"]


def test_malformed_yaml_names_the_file_and_the_line(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    bad = cm("fine") + "---\napiVersion: v1\nkind: ConfigMap\n  metadata: x\n"  # line 9
    repo.commit({"app/ok.yaml": cm("ok"), "app/bad.yaml": bad})
    with pytest.raises(RenderError) as caught:
        renderer.render(source, source.resolve(repo.url), "app", RenderParams())
    assert str(caught.value) == (
        "app/bad.yaml: invalid YAML at line 9: mapping values are not allowed in this context"
    )
    assert renderer.renders == 0


def test_malformed_json_names_the_file_and_the_line() -> None:
    with pytest.raises(RenderError, match=r"^x\.json: invalid JSON at line 2:"):
        parse_manifests("x.json", b'{"kind": "ConfigMap",\n oops}')


def test_an_object_without_kind_names_the_file_and_document(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    no_kind = "apiVersion: v1\nmetadata:\n  name: x\n"
    repo.commit({"app/objs.yaml": cm("first") + "---\n" + no_kind})
    with pytest.raises(RenderError) as caught:
        renderer.render(source, source.resolve(repo.url), "app", RenderParams())
    assert str(caught.value) == (
        "app/objs.yaml document 2: object has no kind; "
        "every object needs apiVersion, kind and metadata.name"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n- b\n", "doc.yaml document 1: expected a Kubernetes object (a mapping), got a list"),
        ("kind: X\nmetadata: {name: n}\n", "doc.yaml document 1: object has no apiVersion"),
        ("apiVersion: v1\nkind: X\n", "doc.yaml document 1: X has no metadata.name"),
        (
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: X}\n",
            "doc.yaml document 1 item 1: X has no metadata.name",
        ),
    ],
)
def test_objects_that_are_not_kubernetes_objects_are_rejected(text: str, message: str) -> None:
    with pytest.raises(RenderError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        parse_manifests("doc.yaml", text.encode())


def test_a_commit_that_does_not_touch_the_path_is_served_from_the_cache(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    repo.commit({"app/cm.yaml": cm("cfg", a="1"), "docs/readme.md": "v1"})
    first = renderer.render(source, source.resolve(repo.url), "app", RenderParams())
    repo.commit({"docs/readme.md": "v2"})
    second = renderer.render(source, source.resolve(repo.url), "app", RenderParams())
    assert (second.cached, second.cache_key, renderer.renders) == (True, first.cache_key, 1)
    assert second.objects == first.objects
    repo.commit({"app/cm.yaml": cm("cfg", a="2")})
    third = renderer.render(source, source.resolve(repo.url), "app", RenderParams())
    assert (third.cached, renderer.renders) == (False, 2)
    assert third.objects[0]["data"] == {"a": "2"}


def test_cached_objects_are_fresh_copies_that_callers_may_change(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    repo.commit({"app/cm.yaml": cm("cfg")})
    first = renderer.render(source, source.resolve(repo.url), "app", RenderParams())
    first.objects[0]["metadata"]["namespace"] = "changed-by-a-later-stage"
    again = renderer.render(source, source.resolve(repo.url), "app", RenderParams())
    assert "namespace" not in again.objects[0]["metadata"]


def test_the_disk_cache_survives_a_new_renderer(
    repo: GitRepo, source: SourceCache, tmp_path: Path
) -> None:
    repo.commit({"app/cm.yaml": cm("cfg")})
    resolved = source.resolve(repo.url)
    Renderer(tmp_path / "renders").render(source, resolved, "app", RenderParams())
    fresh = Renderer(tmp_path / "renders")
    result = fresh.render(source, resolved, "app", RenderParams())
    assert (result.cached, fresh.renders) == (True, 0)
    assert [o["metadata"]["name"] for o in result.objects] == ["cfg"]


def test_without_a_cache_dir_only_the_memory_cache_is_used(
    repo: GitRepo, source: SourceCache
) -> None:
    repo.commit({"app/cm.yaml": cm("cfg")})
    resolved = source.resolve(repo.url)
    renderer = Renderer(None)
    renderer.render(source, resolved, "app", RenderParams())
    assert renderer.render(source, resolved, "app", RenderParams()).cached
    assert not Renderer(None).render(source, resolved, "app", RenderParams()).cached


def test_an_unknown_renderer_is_rejected(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    repo.commit({"app/cm.yaml": cm("cfg")})
    with pytest.raises(RenderError, match="unknown renderer 'jsonnet' for app"):
        renderer.render(source, source.resolve(repo.url), "app", RenderParams(renderer="jsonnet"))


def test_the_repository_root_renders_as_a_plain_directory(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    repo.commit({"cm.yaml": cm("root"), "nested/cm.yaml": cm("nested")})
    assert render_names(renderer, source, repo, "") == ["root", "nested"]
