"""`fleet.kube.incluster`: the cluster a pod runs in, from its environment and mounted files."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.errors import UsageError
from fleet.kube import incluster


def mounted(tmp_path: Path, *, namespace: str | None = "gitfleet") -> dict[str, str]:
    folder = tmp_path / "sa"
    folder.mkdir()
    (folder / "token").write_text("tok-123\n")
    (folder / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    if namespace is not None:
        (folder / "namespace").write_text(namespace)
    return {
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        incluster.DIR_ENV: str(folder),
    }


def test_a_pod_with_a_mounted_account_is_in_cluster_and_reaches_its_service(
    tmp_path: Path,
) -> None:
    env = mounted(tmp_path)

    config = incluster.config(env=env)

    assert incluster.is_in_cluster(env)
    assert config.name == "in-cluster"
    assert config.server == "https://10.96.0.1:443"
    assert config.token == "tok-123"
    assert config.ca_pem.startswith(b"-----BEGIN")
    assert config.namespace == "gitfleet"
    assert "tok-123" not in repr(config)


def test_an_ipv6_service_address_is_bracketed() -> None:
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    assert incluster.server_url(env) == "https://[fd00::1]:443"


@pytest.mark.parametrize("missing", ["KUBERNETES_SERVICE_HOST", "token", "ca.crt"])
def test_without_the_service_or_a_mounted_file_it_is_not_in_cluster(
    tmp_path: Path, missing: str
) -> None:
    env = mounted(tmp_path)
    if missing in env:
        del env[missing]
    else:
        (Path(env[incluster.DIR_ENV]) / missing).unlink()

    assert not incluster.is_in_cluster(env)


def test_configuring_outside_a_pod_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT"):
        incluster.config(env={incluster.DIR_ENV: str(tmp_path)})
    env = {**mounted(tmp_path), incluster.DIR_ENV: str(tmp_path / "nowhere")}
    with pytest.raises(UsageError, match=r"cannot read the pod's ServiceAccount from .*nowhere"):
        incluster.config(env=env)


def test_the_namespace_defaults_to_default_when_not_mounted(tmp_path: Path) -> None:
    assert incluster.config(env=mounted(tmp_path, namespace=None)).namespace == "default"
