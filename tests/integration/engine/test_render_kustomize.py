"""Kustomize rendering with the real `kubectl kustomize`, over git repos in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.engine.render.cache import Renderer, RenderResult
from fleet.engine.render.job import RenderParams
from fleet.engine.source.cache import SourceCache
from fleet.errors import RenderError
from tests.support.gitrepo import GitRepo

BASE = {
    "base/kustomization.yaml": "resources:\n- cm.yaml\n- ../shared/common\n",
    "base/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: '1'\n"
    ),
    "shared/common/kustomization.yaml": "resources:\n- sa.yaml\n",
    "shared/common/sa.yaml": "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: runner\n",
    "overlays/prod/kustomization.yaml": "namePrefix: prod-\nresources:\n- ../../base\n",
    "docs/README.md": "docs\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo.create(tmp_path / "repo")
    repo.commit(BASE, "base and overlay")
    return repo


def render(renderer: Renderer, source: SourceCache, repo: GitRepo, path: str) -> RenderResult:
    return renderer.render(source, source.resolve(repo.url), path, RenderParams())


def test_an_overlay_renders_its_base_and_the_bases_own_references(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    result = render(renderer, source, repo, "overlays/prod")
    assert result.renderer == "kustomize"
    names = sorted((o["kind"], o["metadata"]["name"]) for o in result.objects)
    assert names == [("ConfigMap", "prod-settings"), ("ServiceAccount", "prod-runner")]


def test_a_change_in_the_base_re_renders_the_overlay(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    first = render(renderer, source, repo, "overlays/prod")
    repo.commit({"base/cm.yaml": BASE["base/cm.yaml"].replace("'1'", "'2'")})
    second = render(renderer, source, repo, "overlays/prod")
    assert (second.cached, renderer.renders) == (False, 2)
    assert second.cache_key != first.cache_key
    settings = next(o for o in second.objects if o["kind"] == "ConfigMap")
    assert settings["data"] == {"a": "2"}


def test_a_change_two_references_away_re_renders_the_overlay(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    render(renderer, source, repo, "overlays/prod")
    sa = BASE["shared/common/sa.yaml"] + "automountServiceAccountToken: false\n"
    repo.commit({"shared/common/sa.yaml": sa})
    result = render(renderer, source, repo, "overlays/prod")
    assert (result.cached, renderer.renders) == (False, 2)
    runner = next(o for o in result.objects if o["kind"] == "ServiceAccount")
    assert runner["automountServiceAccountToken"] is False


def test_a_change_outside_every_reference_is_served_from_the_cache(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    first = render(renderer, source, repo, "overlays/prod")
    repo.commit({"docs/README.md": "more docs\n", "overlays/dev/kustomization.yaml": "{}\n"})
    second = render(renderer, source, repo, "overlays/prod")
    assert (second.cached, second.cache_key, renderer.renders) == (True, first.cache_key, 1)


def test_a_second_process_reuses_the_rendered_overlay_from_disk(
    repo: GitRepo, source: SourceCache, tmp_path: Path
) -> None:
    resolved = source.resolve(repo.url)
    Renderer(tmp_path / "renders").render(source, resolved, "overlays/prod", RenderParams())
    fresh = Renderer(tmp_path / "renders")
    assert fresh.render(source, resolved, "overlays/prod", RenderParams()).cached
    assert fresh.renders == 0


def test_a_capitalized_kustomization_file_is_detected(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    repo.commit(
        {"solo/Kustomization": "resources:\n- cm.yaml\n", "solo/cm.yaml": BASE["base/cm.yaml"]}
    )
    result = render(renderer, source, repo, "solo")
    assert result.renderer == "kustomize"
    assert [o["metadata"]["name"] for o in result.objects] == ["settings"]


def test_a_kustomize_failure_reports_kustomizes_message_and_the_path(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    kustomization = "resources:\n- cm.yaml\npatches:\n- path: missing.yaml\n"
    repo.commit(
        {"broken/kustomization.yaml": kustomization, "broken/cm.yaml": BASE["base/cm.yaml"]}
    )
    with pytest.raises(RenderError) as caught:
        render(renderer, source, repo, "broken")
    message = str(caught.value)
    assert message.startswith("kustomize build of broken failed: ")
    assert "missing.yaml" in message
    assert "gitfleet-kustomize-" not in message
    assert renderer.renders == 0


@pytest.mark.parametrize(
    ("ref", "resolved"),
    [("../../../elsewhere", "../elsewhere"), ("/etc/host-dir", "/etc/host-dir")],
)
def test_a_reference_outside_the_repository_is_refused_before_kustomize_runs(
    repo: GitRepo, source: SourceCache, renderer: Renderer, ref: str, resolved: str
) -> None:
    repo.commit({"apps/escape/kustomization.yaml": f"resources:\n- {ref}\n"})
    with pytest.raises(RenderError) as caught:
        render(renderer, source, repo, "apps/escape")
    assert str(caught.value) == (
        "apps/escape refers to a path outside the repository "
        f"({resolved!r} from the repository root)"
    )
