"""Helm rendering with a real `helm template`; the `helm_binary` session fixture provides helm."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.engine.render.cache import Renderer, RenderResult
from fleet.engine.render.job import RenderParams
from fleet.engine.source.cache import SourceCache
from fleet.errors import RenderError
from fleet.model import Manifest
from tests.support.gitrepo import GitRepo

CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
  namespace: {{ .Release.Namespace }}
data:
  color: {{ .Values.color | quote }}
  size: {{ .Values.size | quote }}
  common: {{ .Values.common.greeting | default "none" | quote }}
"""
CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
"""
LIB_CHART = "apiVersion: v2\nname: common\nversion: 0.1.0\n"
LIB_SA = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {{ .Values.saName }}\n"
CHART = """apiVersion: v2
name: web
version: 1.0.0
dependencies:
- name: common
  version: 0.1.0
  repository: file://../../libs/common
"""
FILES = {
    "charts/web/Chart.yaml": CHART,
    "charts/web/values.yaml": "color: blue\nsize: small\ncommon:\n  saName: web-runner\n",
    "charts/web/values-prod.yaml": "size: large\n",
    "charts/web/templates/cm.yaml": CONFIGMAP,
    "charts/web/crds/widgets.yaml": CRD,
    "libs/common/Chart.yaml": LIB_CHART,
    "libs/common/values.yaml": "saName: default-runner\n",
    "libs/common/templates/sa.yaml": LIB_SA,
    "docs/README.md": "docs\n",
}


@pytest.fixture(autouse=True)
def helm(helm_binary: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GITFLEET_HELM", str(helm_binary))
    return helm_binary


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo.create(tmp_path / "repo")
    repo.commit(FILES, "chart with a local dependency")
    return repo


def render(
    renderer: Renderer, source: SourceCache, repo: GitRepo, params: RenderParams | None = None
) -> RenderResult:
    resolved = source.resolve(repo.url)
    return renderer.render(source, resolved, "charts/web", params or RenderParams())


def by_kind(result: RenderResult) -> dict[str, Manifest]:
    return {str(o["kind"]): o for o in result.objects}


def test_a_chart_renders_with_its_crds_and_local_dependency(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    result = render(renderer, source, repo, RenderParams(namespace="shop"))
    objects = by_kind(result)
    assert result.renderer == "helm"
    assert set(objects) == {"ConfigMap", "CustomResourceDefinition", "ServiceAccount"}
    assert objects["ConfigMap"]["metadata"] == {"name": "web-settings", "namespace": "shop"}
    assert objects["ServiceAccount"]["metadata"] == {"name": "web-runner"}


def test_values_files_values_documents_and_set_pairs_apply_in_that_order(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    params = RenderParams(
        release_name="shop",
        values_files=("values-prod.yaml",),
        values_yaml=("color: green\nsize: medium\n",),
        values=(("color", "red"),),
    )
    result = render(renderer, source, repo, params)
    settings = by_kind(result)["ConfigMap"]
    assert settings["metadata"]["name"] == "shop-settings"
    assert settings["data"] == {"color": "red", "size": "medium", "common": "none"}


def test_a_change_in_a_local_dependency_re_renders_and_an_unrelated_change_does_not(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    first = render(renderer, source, repo)
    repo.commit({"docs/README.md": "more\n"})
    assert render(renderer, source, repo).cached
    repo.commit({"libs/common/templates/sa.yaml": LIB_SA + "automountServiceAccountToken: false\n"})
    changed = render(renderer, source, repo)
    assert (changed.cached, renderer.renders) == (False, 2)
    assert changed.cache_key != first.cache_key
    assert by_kind(changed)["ServiceAccount"]["automountServiceAccountToken"] is False


def test_different_parameters_are_cached_separately(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    plain = render(renderer, source, repo)
    tuned = render(renderer, source, repo, RenderParams(values=(("size", "tiny"),)))
    assert plain.cache_key != tuned.cache_key
    assert renderer.renders == 2


def test_a_missing_values_file_is_reported(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    with pytest.raises(RenderError, match=r"values file 'values-qa\.yaml' not found in charts/web"):
        render(renderer, source, repo, RenderParams(values_files=("values-qa.yaml",)))


def test_a_template_error_reports_helms_message_and_the_path(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    repo.commit({"charts/web/templates/bad.yaml": "{{ .Values.missing.field }}\n"})
    with pytest.raises(RenderError) as caught:
        render(renderer, source, repo)
    message = str(caught.value)
    assert message.startswith("helm template of charts/web failed: ")
    assert "bad.yaml" in message
    assert "nil pointer" in message
