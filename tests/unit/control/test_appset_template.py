"""The `{{param}}` syntax of app set templates and the parameters generators give (pure)."""

from __future__ import annotations

import pytest

from fleet.control.appsets.generators import cluster_params, path_params
from fleet.control.appsets.records import AppSetRecord, Generator, ListGenerator
from fleet.control.appsets.template import TemplateError, render
from fleet.control.registry import records
from fleet.control.registry.records import ClusterRecord


def test_parameters_render_in_values_and_keys_with_optional_spaces() -> None:
    template = {
        "name": "web-{{ name }}",
        "labels": {"{{labels.region}}": "yes"},
        "paths": ["{{path[1]}}", 3, True],
    }
    params = {"name": "eu", "labels.region": "west", "path[1]": "b"}
    assert render(template, params) == {
        "name": "web-eu",
        "labels": {"west": "yes"},
        "paths": ["b", 3, True],
    }


def test_an_unknown_parameter_names_itself_the_field_and_the_known_ones() -> None:
    with pytest.raises(TemplateError) as raised:
        render({"destination": {"namespace": "{{regoin}}"}}, {"region": "eu"})
    assert str(raised.value) == (
        "template.destination.namespace: unknown parameter {{regoin}} (known: region)"
    )


def test_cluster_and_path_parameters() -> None:
    cluster = ClusterRecord("prod-eu", "https://eu:6443", {"region": "eu"})
    assert cluster_params(cluster) == {
        "name": "prod-eu",
        "server": "https://eu:6443",
        "labels.region": "eu",
    }
    assert path_params("apps/My_Shop") == {
        "path": "apps/My_Shop",
        "path.basename": "My_Shop",
        "path.basenameNormalized": "my-shop",
        "path[0]": "apps",
        "path[1]": "My_Shop",
    }


def test_an_app_set_record_reads_back_as_written() -> None:
    record = AppSetRecord(
        "web",
        Generator(list=ListGenerator(({"env": "a"},))),
        {"name": "{{env}}", "source": {"repo": "https://h/r"}},
    )
    assert records.from_json(AppSetRecord, records.to_json(record)) == record
