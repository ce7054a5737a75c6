"""Attacker variants the other security tests do not spell out (issue 10, review).

The attacker holds a member token of project `team-a` (sourceRepos `https://github.com/team-a/*`,
one destination namespace) or commits to a repository that project allows. Each variant must
end in a 4xx from the real API or a render error from the real `kubectl kustomize`/`helm` that
names the rule, never in a file of the worker read into a rendered object.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import get_dispatcher
from fleet.engine.render.cache import Renderer
from fleet.engine.render.job import RenderParams
from fleet.engine.source.cache import SourceCache
from fleet.errors import RenderError
from tests.api.conftest import ADMIN_TOKEN, RecordingDispatcher, fake_kubeconfig, settings_for
from tests.security.test_repo_content import REGULAR, Listener, Raw, craft
from tests.support.gitrepo import GitRepo
from tests.support.redis_server import RedisServer

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: '1'\n"
WORKER_FILE = "/etc/passwd"  # any file on the worker; its first line names root
OUTSIDE = "outside the repository"
CHART = "apiVersion: v2\nname: web\nversion: 1.0.0\n"

# -- kustomize: file fields that name a file of the worker ------------------------------------

KUSTOMIZE_LEAKS = {
    "configMapGenerator files, absolute": (
        "configMapGenerator:\n- name: leak\n  files:\n  - /etc/passwd\n"
    ),
    "configMapGenerator files, key=absolute": (
        "configMapGenerator:\n- name: leak\n  files:\n  - passwd=/etc/passwd\n"
    ),
    "configMapGenerator files, dot-dot past the root": (
        "configMapGenerator:\n- name: leak\n  files:\n  - ../../../../../../../../etc/passwd\n"
    ),
    "configMapGenerator envs, absolute": (
        "configMapGenerator:\n- name: leak\n  envs:\n  - /etc/passwd\n"
    ),
    "configMapGenerator env, dot-dot past the root": (
        "configMapGenerator:\n- name: leak\n  env: ../../../../../../../../etc/passwd\n"
    ),
    "secretGenerator files, absolute": (
        "secretGenerator:\n- name: leak\n  files:\n  - /etc/passwd\n"
    ),
    "patches path, absolute": "resources:\n- cm.yaml\npatches:\n- path: /etc/passwd\n",
    "patchesStrategicMerge, dot-dot": (
        "resources:\n- cm.yaml\npatchesStrategicMerge:\n- ../../../../../../../etc/passwd\n"
    ),
    "crds, absolute": "resources:\n- cm.yaml\ncrds:\n- /etc/passwd\n",
    "openapi path, absolute": "resources:\n- cm.yaml\nopenapi:\n  path: /etc/passwd\n",
    "resources, absolute folder": "resources:\n- /etc\n",
    "resources, absolute file": "resources:\n- /etc/passwd\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo.create(tmp_path / "repo")


@pytest.mark.parametrize("kustomization", KUSTOMIZE_LEAKS.values(), ids=list(KUSTOMIZE_LEAKS))
def test_a_kustomization_naming_a_file_of_the_worker_is_refused_by_gitfleet(
    repo: GitRepo, source: SourceCache, renderer: Renderer, kustomization: str
) -> None:
    repo.commit({"app/kustomization.yaml": kustomization, "app/cm.yaml": CM})

    with pytest.raises(RenderError) as refused:
        renderer.render(source, source.resolve(repo.url), "app", RenderParams())

    message = str(refused.value)
    assert "app/kustomization.yaml" in message or "app refers to" in message, message
    assert OUTSIDE in message, message
    assert "root:" not in message  # nothing of the worker's file is repeated
    assert "gitfleet-kustomize-" not in message  # nor the worker's own render folder
    assert renderer.renders == 0


PATCH_FROM_URL = "apiVersion: builtin\nkind: PatchTransformer\nmetadata: {{name: p}}\npath: {url}\n"
GENERATOR_OF_WORKER_FILE = (
    "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {name: leak}\nfiles: [/etc/passwd]\n"
)


def _inline(config: str) -> str:
    return "".join(f"  {line}\n" for line in config.splitlines())


@pytest.mark.parametrize("field", ["transformers", "generators", "validators"])
@pytest.mark.parametrize("where", ["inline", "file"])
def test_a_url_in_a_kustomize_plugin_config_is_refused_and_never_fetched(
    repo: GitRepo, source: SourceCache, renderer: Renderer, field: str, where: str
) -> None:
    listener = Listener({"patch.yaml": "metadata: {name: settings, labels: {owned: 'yes'}}\n"})
    url = f"http://{listener.base}/patch.yaml"
    config = PATCH_FROM_URL.format(url=url)
    files = {"app/cm.yaml": CM}
    if where == "inline":
        files["app/kustomization.yaml"] = f"resources:\n- cm.yaml\n{field}:\n- |\n{_inline(config)}"
    else:
        files["app/kustomization.yaml"] = f"resources:\n- cm.yaml\n{field}:\n- plugin.txt\n"
        files["app/plugin.txt"] = config  # kustomize reads it as YAML whatever its name
    repo.commit(files)

    try:
        with pytest.raises(RenderError) as refused:
            renderer.render(source, source.resolve(repo.url), "app", RenderParams())
    finally:
        listener.close()

    assert f"path {url!r} is a URL" in str(refused.value)
    assert "allowRemoteRenders" in str(refused.value)
    assert listener.connections == 0


@pytest.mark.parametrize("where", ["inline", "file"])
def test_a_kustomize_generator_config_naming_a_file_of_the_worker_is_refused_by_gitfleet(
    repo: GitRepo, source: SourceCache, renderer: Renderer, where: str
) -> None:
    files = {"app/cm.yaml": CM}
    if where == "inline":
        inline = _inline(GENERATOR_OF_WORKER_FILE)
        files["app/kustomization.yaml"] = f"resources:\n- cm.yaml\ngenerators:\n- |\n{inline}"
    else:
        files["app/kustomization.yaml"] = "resources:\n- cm.yaml\ngenerators:\n- gen.yaml\n"
        files["app/gen.yaml"] = GENERATOR_OF_WORKER_FILE
    repo.commit(files)

    with pytest.raises(RenderError) as refused:
        renderer.render(source, source.resolve(repo.url), "app", RenderParams())

    assert "files '/etc/passwd' is outside the repository" in str(refused.value)
    assert "root:" not in str(refused.value)


def _alias_bomb() -> str:
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: bomb}", "a0: &a0 [x, x, x]"]
    refs = ", ".join(["*a{}"] * 9)
    lines += [f"a{i}: &a{i} [{refs.format(*[i - 1] * 9)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "kustomization",
    ["resources:\n- bomb.txt\n", "resources:\n- cm.yaml\npatches:\n- path: bomb.patch\n"],
)
def test_an_alias_bomb_kustomize_reads_under_any_file_name_is_refused_before_it_runs(
    repo: GitRepo, source: SourceCache, renderer: Renderer, kustomization: str
) -> None:
    bomb = _alias_bomb()
    repo.commit(
        {
            "app/kustomization.yaml": kustomization,
            "app/cm.yaml": CM,
            "app/bomb.txt": bomb,
            "app/bomb.patch": bomb,
        }
    )

    with pytest.raises(RenderError, match=r"app/bomb\.(txt|patch) document 1: YAML aliases"):
        renderer.render(source, source.resolve(repo.url), "app", RenderParams())
    assert renderer.renders == 0


def test_a_kustomize_generator_reading_a_file_inside_the_repository_still_works(
    repo: GitRepo, source: SourceCache, renderer: Renderer
) -> None:
    kustomization = "configMapGenerator:\n- name: conf\n  files:\n  - conf/app.properties\n"
    repo.commit({"app/kustomization.yaml": kustomization, "app/conf/app.properties": "a=1\n"})

    result = renderer.render(source, source.resolve(repo.url), "app", RenderParams())

    [cm] = result.objects
    assert cm["data"] == {"app.properties": "a=1\n"}


@pytest.mark.parametrize("app", ["kustomize", "helm"])
def test_a_tree_entry_name_too_long_for_the_worker_is_a_render_error_not_a_crash(
    repo: GitRepo,
    source: SourceCache,
    renderer: Renderer,
    helm_binary: Path,
    monkeypatch: pytest.MonkeyPatch,
    app: str,
) -> None:
    monkeypatch.setenv("GITFLEET_HELM", str(helm_binary))
    files = {"app/kustomization.yaml": "resources:\n- cm.yaml\n", "app/cm.yaml": CM}
    if app == "helm":
        files = {"app/Chart.yaml": CHART, "app/templates/cm.yaml": CM}
    long_name = "x" * 300  # git allows it; Linux file names stop at 255 bytes
    craft(repo, files, [Raw("app", long_name.encode(), REGULAR, b"a: 1\n")])

    with pytest.raises(RenderError, match="cannot be written in the render folder") as refused:
        renderer.render(source, source.resolve(repo.url), "app", RenderParams())

    assert f"app/{long_name}" in str(refused.value)
    assert "gitfleet-" not in str(refused.value)  # the worker's own folder is not shown


# -- helm: values files and file:// dependencies that leave the repository ---------------------


@pytest.mark.parametrize(
    "values_file",
    ["../../../../../../../etc/passwd", "sub/../../../etc/passwd"],
)
def test_a_helm_values_file_past_the_repository_root_is_refused(
    repo: GitRepo, source: SourceCache, renderer: Renderer, values_file: str
) -> None:
    repo.commit({"app/Chart.yaml": CHART, "app/templates/cm.yaml": CM})

    with pytest.raises(RenderError, match=OUTSIDE):
        renderer.render(
            source, source.resolve(repo.url), "app", RenderParams(values_files=(values_file,))
        )


def test_a_helm_values_file_climbing_from_the_root_is_read_from_the_repository_only(
    repo: GitRepo,
    source: SourceCache,
    renderer: Renderer,
    helm_binary: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITFLEET_HELM", str(helm_binary))
    repo.commit({"app/Chart.yaml": CHART, "app/templates/cm.yaml": CM})
    params = RenderParams(values_files=("/../../../../etc/passwd",))

    with pytest.raises(RenderError, match=r"not found in app \(etc/passwd\)") as refused:
        renderer.render(source, source.resolve(repo.url), "app", params)

    assert "root:" not in str(refused.value)


@pytest.mark.parametrize("dependency", ["file:///etc", "file://../../../../../etc"])
def test_a_helm_file_dependency_past_the_repository_root_is_refused(
    repo: GitRepo, source: SourceCache, renderer: Renderer, dependency: str
) -> None:
    chart = CHART + f"dependencies:\n- {{name: x, version: 1.0.0, repository: '{dependency}'}}\n"
    repo.commit({"app/Chart.yaml": chart, "app/templates/cm.yaml": CM})

    with pytest.raises(RenderError, match="outside the repository"):
        renderer.render(source, source.resolve(repo.url), "app", RenderParams())


# -- the API: spellings a member may try -----------------------------------------------------

NOT_ALLOWED = "is not an allowed source of project team-a"
URL_VARIANTS = {
    "HTTPS://github.com/team-a/../team-b/x": 422,
    "https://github.com/team-a/%2F../team-b": 422,
    "https://github.com/team-a/shop%5c..%5c..%5cteam-b": 422,
    "https://github.com\\team-a\\..\\team-b": 422,
    "https://github.com/team-a/sh%00op": 422,
    "https://github.com/team-a/shop/../../team-b/x": 422,
    "https://github.com/team-a/%2e": 422,
    "https://github.com/team-a/.git": 422,
    "https://github\u3002com/team-a/shop": 422,  # an ideographic full stop in the host
    "https://github.com./team-a/shop": 422,
    "https://github.com@evil.example/team-a/shop": 422,
    "https://github.com/team-a/shop\nhttps://github.com/team-b/x": 422,
    "https://[::1]/team-a/shop": 403,
    "https://[::ffff:140.82.112.3]/team-a/shop": 403,
    "https://0x7f.1/team-a/shop": 403,
    "ssh://git@github.com:22/team-a/shop": 403,
    "https://github.com/team-a/%252e%252e/team-b": 403,  # two segments below team-a
}

PAYLOADS: dict[str, tuple[dict[str, Any], int]] = {
    "path with backslash dot-dot": ({"source": {"path": "app\\..\\..\\etc"}}, 422),
    "path with dot-dot after a dot": ({"source": {"path": "a/./../.."}}, 422),
    "absolute path": ({"source": {"path": "/etc"}}, 422),
    "app name with dot-dot": ({"name": "../team-b"}, 422),
    "app name with a slash": ({"name": "a/b"}, 422),
    "project name with dot-dot": ({"project": ".."}, 422),
    "namespace glob": ({"destination": {"cluster": "east", "namespace": "*"}}, 422),
    "another project": ({"project": "team-b"}, 403),
    "another namespace": ({"destination": {"cluster": "east", "namespace": "kube-system"}}, 403),
}


class Api:
    def __init__(self, client: TestClient, member: dict[str, str]) -> None:
        self.client = client
        self.member = member

    def body(self, **changes: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": "shop",
            "project": "team-a",
            "source": {"repo": "https://github.com/team-a/shop", "path": "app"},
            "destination": {"cluster": "east", "namespace": "team-a"},
        }
        for key, value in changes.items():
            body[key] = {**body.get(key, {}), **value} if isinstance(value, dict) else value
        return body

    def apps(self) -> list[Any]:
        answer = self.client.get("/api/v1/apps", headers=self.member)
        return list(answer.json())


@pytest.fixture
def api(redis_server: RedisServer) -> Iterator[Api]:
    prefix = f"variants-{uuid.uuid4().hex[:8]}"
    app = create_app(settings_for(redis_server.url, prefix=prefix))
    app.dependency_overrides[get_dispatcher] = RecordingDispatcher
    with TestClient(app, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
        client.post("/api/v1/clusters", json={"name": "east", "kubeconfig": fake_kubeconfig("t")})
        for team in ("team-a", "team-b"):
            project = {
                "name": team,
                "sourceRepos": [f"https://github.com/{team}/*"],
                "destinations": [{"cluster": "east", "namespace": team}],
            }
            assert client.post("/api/v1/projects", json=project).status_code == 201
        body = {"name": "team-a-ci", "role": "member", "project": "team-a"}
        token = client.post("/api/v1/tokens", json=body).json()["token"]
        yield Api(client, {"Authorization": f"Bearer {token}"})
        store = app.state.store
        for key in store.redis.scan_iter(f"{prefix}:*"):
            store.redis.delete(key)


@pytest.mark.parametrize(("repo", "status"), URL_VARIANTS.items(), ids=list(URL_VARIANTS))
def test_a_member_cannot_name_a_repository_outside_its_project_in_any_spelling(
    api: Api, repo: str, status: int
) -> None:
    created = api.client.post(
        "/api/v1/apps", json=api.body(source={"repo": repo}), headers=api.member
    )

    assert created.status_code == status, created.text
    if status == 403:
        assert NOT_ALLOWED in created.json()["detail"]
    assert api.apps() == []


@pytest.mark.parametrize(("change", "status"), PAYLOADS.values(), ids=list(PAYLOADS))
def test_a_member_cannot_send_an_app_that_leaves_its_project_or_its_repository(
    api: Api, change: dict[str, Any], status: int
) -> None:
    created = api.client.post("/api/v1/apps", json=api.body(**change), headers=api.member)

    assert created.status_code == status, created.text
    assert api.apps() == []


def test_a_member_can_neither_read_nor_touch_another_projects_app(api: Api) -> None:
    theirs = api.body(name="shop", project="team-b")
    theirs["source"]["repo"] = "https://github.com/team-b/shop"
    theirs["destination"]["namespace"] = "team-b"
    assert api.client.post("/api/v1/apps", json=theirs).status_code == 201
    mine = api.body(name="shop", source={"repo": "https://github.com/team-a/shop"})

    answers = {
        "get": api.client.get("/api/v1/apps/shop", headers=api.member),
        "history": api.client.get("/api/v1/apps/shop/history", headers=api.member),
        "diff": api.client.get("/api/v1/apps/shop/diff", headers=api.member),
        "sync": api.client.post("/api/v1/apps/shop/sync", headers=api.member),
        "rollback": api.client.post(
            "/api/v1/apps/shop/rollback", json={"revision": "HEAD"}, headers=api.member
        ),
        "put": api.client.put("/api/v1/apps/shop", json=mine, headers=api.member),
        "create over it": api.client.post("/api/v1/apps", json=mine, headers=api.member),
        "delete": api.client.delete("/api/v1/apps/shop", headers=api.member),
    }

    for what, answer in answers.items():
        assert 400 <= answer.status_code < 500, (what, answer.status_code, answer.text)
        assert "team-b/shop" not in answer.text, what
    assert api.client.get("/api/v1/apps/shop").json()["project"] == "team-b"
    assert api.apps() == []


WINDOW = {"kind": "allow", "schedule": "0 22 * * *", "duration": "1h"}
POLICIES = {
    "window duration past timedelta": {"syncWindows": [{**WINDOW, "duration": "9" * 20 + "h"}]},
    "window time zone longer than a file name": {
        "syncWindows": [{**WINDOW, "timezone": "a" * 300}]
    },
    "window time zone naming a folder": {"syncWindows": [{**WINDOW, "timezone": "America"}]},
    "interval past timedelta": {"interval": "9" * 20 + "h"},
    "retry backoff past timedelta": {"retry": {"backoff": "9" * 20 + "m"}},
}


@pytest.mark.parametrize("policy", POLICIES.values(), ids=list(POLICIES))
def test_a_sync_policy_a_member_sends_is_a_422_never_a_server_error(
    api: Api, policy: dict[str, Any]
) -> None:
    created = api.client.post("/api/v1/apps", json=api.body(syncPolicy=policy), headers=api.member)

    assert created.status_code == 422, created.text[:300]
    assert api.apps() == []


def test_a_huge_label_map_in_a_cluster_selector_is_cut_off_by_the_body_limit(api: Api) -> None:
    selector = {f"k{i}": "v" * 60 for i in range(40_000)}
    body = api.body(destination={"cluster": None, "clusterSelector": selector})

    created = api.client.post("/api/v1/apps", json=body, headers=api.member)

    assert created.status_code == 413, created.text[:200]
    assert api.apps() == []
