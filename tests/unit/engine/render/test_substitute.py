"""Post-build `${var}` substitution (Flux's syntax): values, defaults, escapes, the missing
variable's error, opt-in, helm values, and the render cache keeping one render per values."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fleet.engine.render.cache import Renderer
from fleet.engine.render.job import RenderParams
from fleet.engine.render.substitute import (
    SubstitutionError,
    cluster_variables,
    substitute_stream,
    substitute_text,
    substitute_values,
)
from fleet.engine.source.cache import SourceCache
from tests.support.gitrepo import GitRepo

VARS = {"region": "eu-west-1", "replicas": "3", "empty": ""}


def test_a_variable_is_replaced_by_its_value() -> None:
    assert substitute_text("at ${region}!", VARS, "f.yaml") == "at eu-west-1!"


@pytest.mark.parametrize("op", [":=", ":-"])
def test_a_default_serves_an_unset_or_empty_variable_only(op: str) -> None:
    assert substitute_text(f"${{missing{op}us-east-2}}", VARS, "f") == "us-east-2"
    assert substitute_text(f"${{empty{op}fallback}}", VARS, "f") == "fallback"
    assert substitute_text(f"${{region{op}fallback}}", VARS, "f") == "eu-west-1"
    assert substitute_text(f"${{missing{op}}}", VARS, "f") == ""


def test_an_escaped_expression_is_kept_as_text() -> None:
    assert substitute_text("echo $${HOME} ${region}", VARS, "f") == "echo ${HOME} eu-west-1"


def test_bare_dollar_names_and_invalid_names_are_left_alone() -> None:
    text = "echo $HOME ${1abc} ${a-b} $ {region}"
    assert substitute_text(text, VARS, "f") == text


def test_a_missing_variable_without_default_names_the_variable_and_the_file() -> None:
    with pytest.raises(SubstitutionError) as caught:
        substitute_text("name: ${tier}", VARS, "apps/web/deploy.yaml: Deployment web")
    message = str(caught.value)
    assert "${tier}" in message and "apps/web/deploy.yaml" in message
    assert caught.value.variable == "tier"
    assert caught.value.stage == "render"


def test_quoting_decides_types_as_in_flux() -> None:
    text = b'spec:\n  replicas: ${replicas}\n  label: "${replicas}"\n'
    objects = yaml.safe_load(substitute_stream(text, VARS, "f.yaml"))
    assert objects == {"spec": {"replicas": 3, "label": "3"}}


@pytest.mark.parametrize("where", ["annotations", "labels"])
def test_a_document_marked_disabled_is_left_alone_and_the_others_are_not(where: str) -> None:
    kept = (
        f"kind: ConfigMap\nmetadata:\n  {where}:\n"
        "    kustomize.toolkit.fluxcd.io/substitute: disabled\ndata:\n  run.sh: echo ${x}\n"
    )
    text = f"{kept}---\nkind: ConfigMap\ndata:\n  r: ${{region}}\n".encode()
    first, second = list(yaml.safe_load_all(substitute_stream(text, VARS, "f.yaml")))
    assert first["data"] == {"run.sh": "echo ${x}"}
    assert second["data"] == {"r": "eu-west-1"}


def test_a_missing_variable_in_a_stream_names_the_file_and_the_document() -> None:
    text = b"a: ${region}\n---\nb: ${tier}\n"
    with pytest.raises(SubstitutionError, match=r"apps/web/x\.yaml document 2.*\$\{tier\}"):
        substitute_stream(text, VARS, "apps/web/x.yaml")


def test_helm_output_errors_name_the_template() -> None:
    text = b"---\n# Source: web/templates/cm.yaml\nkind: ConfigMap\ndata: {a: ${tier}}\n"
    with pytest.raises(SubstitutionError, match=r"helm output of web \(web/templates/cm.yaml\)"):
        substitute_stream(text, VARS, "helm output of web")


def test_cluster_variables_name_the_cluster_and_each_label() -> None:
    found = cluster_variables("east", {"region": "us", "topology.kubernetes.io/zone": "a"})
    assert found == {
        "cluster_name": "east",
        "cluster_label_region": "us",
        "cluster_label_topology_kubernetes_io_zone": "a",
    }


def test_helm_values_are_substituted_and_a_missing_one_names_the_parameter() -> None:
    sets, docs = substitute_values([("image.tag", "${tag:=1.0}")], ["zone: ${region}\n"], VARS)
    assert sets == (("image.tag", "1.0"),) and docs == ("zone: eu-west-1\n",)
    with pytest.raises(SubstitutionError, match=r"helm parameter size.*\$\{tier\}"):
        substitute_values([("size", "${tier}")], [], VARS)


CM = """apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  region: ${cluster_label_region}
  script: echo $${PATH} ${cluster_name}
"""


def test_render_substitutes_per_values_and_never_serves_one_clusters_values_to_another(
    tmp_path: Path, source: SourceCache
) -> None:
    repo = GitRepo.create(tmp_path / "repo")
    repo.commit({"app/cm.yaml": CM})
    resolved = source.resolve(repo.url)
    renderer = Renderer(tmp_path / "renders")

    def render(name: str, region: str) -> tuple[dict[str, str], str, bool]:  # data, key, cached
        variables = tuple(cluster_variables(name, {"region": region}).items())
        result = renderer.render(source, resolved, "app", RenderParams(substitute=variables))
        return result.objects[0]["data"], result.cache_key, result.cached

    east, east_key, _ = render("east", "us-east")
    west, west_key, west_cached = render("west", "eu-west")
    assert east == {"region": "us-east", "script": "echo ${PATH} east"}
    assert west == {"region": "eu-west", "script": "echo ${PATH} west"}
    assert east_key != west_key and not west_cached  # the values are part of the key
    again = render("east", "us-east")
    assert again[1] == east_key and again[2]  # the same values are served from the cache


def test_substitution_is_off_unless_asked_and_a_missing_variable_names_the_file(
    tmp_path: Path, source: SourceCache, renderer: Renderer
) -> None:
    repo = GitRepo.create(tmp_path / "repo")
    repo.commit({"app/cm.yaml": CM})
    resolved = source.resolve(repo.url)
    plain = renderer.render(source, resolved, "app", RenderParams())
    assert plain.objects[0]["data"]["region"] == "${cluster_label_region}"
    with pytest.raises(SubstitutionError) as caught:
        renderer.render(source, resolved, "app", RenderParams(substitute=(("x", "1"),)))
    assert caught.value.variable == "cluster_label_region"
    assert "app/cm.yaml document 1" in str(caught.value)
