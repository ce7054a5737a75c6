"""`gitfleet sync`, `gitfleet diff` and `gitfleet health` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from fleet.kube.client import KubeClient
from tests.conftest import Cluster
from tests.support import manifests as m
from tests.support.gitrepo import GitRepo


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    monkeypatch.setenv("GITFLEET_CACHE_DIR", str(tmp_path / "cache"))
    return GitRepo.create(tmp_path / "repo")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_sync_json_reports_every_object_and_exits_zero_when_synced_and_healthy(
    repo: GitRepo, cluster: Cluster, namespace: str, capsys: pytest.CaptureFixture[str]
):
    sha = repo.commit({"app/cm.yaml": m.configmap("one"), "app/d.yaml": m.deployment("web")})
    code, out, _ = cli(
        capsys,
        "sync",
        "--repo",
        repo.url,
        "--path",
        "app",
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--namespace",
        namespace,
        "--app",
        f"cli-{namespace}",
        "-o",
        "json",
    )
    report = json.loads(out)
    assert code == 0, report
    assert report["revision"] == sha
    assert (report["sync_status"], report["health"]) == ("Synced", "Healthy")
    assert len(report["trace_id"]) == 32 and report["trace_id"] != "0" * 32
    rows = {(r["kind"], r["name"]): r for r in report["resources"]}
    assert rows[("ConfigMap", "one")]["action"] == "created"
    assert rows[("Deployment", "web")]["health"] == "Healthy"
    assert set(rows[("Deployment", "web")]) >= {
        "group",
        "version",
        "kind",
        "namespace",
        "name",
        "wave",
        "action",
        "health",
        "message",
    }


def test_sync_text_prints_a_table_and_a_render_error_exits_two_naming_the_file(
    repo: GitRepo, cluster: Cluster, namespace: str, capsys: pytest.CaptureFixture[str]
):
    repo.commit({"app/cm.yaml": m.configmap("one")})
    args = [
        "sync",
        "--repo",
        repo.url,
        "--path",
        "app",
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--namespace",
        namespace,
        "--app",
        f"cli-{namespace}",
    ]
    code, out, _ = cli(capsys, *args)
    assert code == 0
    assert "KIND" in out.splitlines()[0] and "ConfigMap" in out and "Synced" in out
    repo.commit({"app/bad.yaml": "kind: ConfigMap\nmetadata: {name: x\n"})
    code, out, _ = cli(capsys, *args)
    assert code == 2
    assert "app/bad.yaml" in out and "line" in out


def test_sync_exits_one_when_health_times_out(
    repo: GitRepo, cluster: Cluster, namespace: str, capsys: pytest.CaptureFixture[str]
):
    group = f"cli{namespace[2:]}.example.com"
    repo.commit({"app/crd.yaml": m.widget_crd(group), "app/w.yaml": m.widget(group, "w1")})
    code, out, _ = cli(
        capsys,
        "sync",
        "--repo",
        repo.url,
        "--path",
        "app",
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--namespace",
        namespace,
        "--timeout",
        "3s",
        "-o",
        "json",
    )
    assert code == 1
    assert (
        f"no controller has reported status for Widget/{namespace}/w1" in json.loads(out)["error"]
    )


def test_diff_exits_one_with_a_masked_secret_diff_and_zero_once_in_sync(
    repo: GitRepo, cluster: Cluster, namespace: str, capsys: pytest.CaptureFixture[str]
):
    secret = (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\n"
        "stringData: {password: hunter2-very-secret}\n"
    )
    repo.commit({"app/s.yaml": secret, "app/cm.yaml": m.configmap("plain", "color: blue")})
    base = [
        "--repo",
        repo.url,
        "--path",
        "app",
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--namespace",
        namespace,
        "--app",
        f"diff-{namespace}",
    ]
    code, out, _ = cli(capsys, "diff", *base)
    assert code == 1
    assert f"+++ desired/Secret/{namespace}/creds" in out
    assert "color: blue" in out
    assert "hunter2" not in out and "aHVudGVyMi" not in out
    assert cli(capsys, "sync", *base)[0] == 0
    code, out, _ = cli(capsys, "diff", *base)
    assert (code, out) == (0, "")
    repo.commit({"app/cm.yaml": m.configmap("plain", "color: green")})
    code, out, _ = cli(capsys, "diff", *base)
    assert code == 1
    assert "-  color: blue" in out and "+  color: green" in out


def test_diff_against_an_unreachable_cluster_exits_two_without_the_token(
    repo: GitRepo, cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    repo.commit({"app/cm.yaml": m.configmap("one")})
    text = cluster.kubeconfig.read_text()
    token = next(line.split(":", 1)[1].strip() for line in text.splitlines() if "token:" in line)
    dead = tmp_path / "dead-kubeconfig"
    dead.write_text(text.replace(cluster.server, "https://127.0.0.1:9"))
    code, out, err = cli(
        capsys,
        "diff",
        "--repo",
        repo.url,
        "--path",
        "app",
        "--kubeconfig",
        str(dead),
        "--namespace",
        "x",
    )
    assert code == 2
    assert "unreachable" in err
    assert token not in out + err


def test_health_command_judges_live_objects(
    kube: KubeClient, namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    kube.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": namespace}}
    )
    live = kube.list("v1", "ConfigMap", namespace=namespace)
    file = tmp_path / "objs.json"
    file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": live}))
    code, out, _ = cli(capsys, "health", "-f", str(file), "-o", "json")
    assert code == 0
    names = {(o["kind"], o["name"]): o["health"] for o in json.loads(out)}
    assert names[("ConfigMap", "c")] == "Healthy"


def test_sync_over_https_style_auth_takes_credentials_from_the_environment_only(
    repo: GitRepo,
    cluster: Cluster,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
):
    from tests.support.gitserver import GitHttpServer

    repo.commit({"app/cm.yaml": m.configmap("over-http")})
    secret = "s3cret-git-password"
    with GitHttpServer({"shop.git": repo.path}, username="deploy", password=secret) as server:
        args = [
            "sync",
            "--repo",
            server.url_for("shop.git"),
            "--path",
            "app",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--namespace",
            namespace,
            "-o",
            "json",
        ]
        code, out, err = cli(capsys, *args)
        assert code == 2
        assert "auth" in json.loads(out)["error"].lower()
        monkeypatch.setenv("GITFLEET_GIT_USERNAME", "deploy")
        monkeypatch.setenv("GITFLEET_GIT_PASSWORD", secret)
        code, out, err = cli(capsys, *args)
    assert code == 0, out
    assert secret not in out + err
    cached_configs = list(Path(str(repo.path)).parent.glob("cache/git/*/config"))
    assert cached_configs and all(secret not in c.read_text() for c in cached_configs)
