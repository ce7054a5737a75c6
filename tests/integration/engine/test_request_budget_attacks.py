"""Attacks on the request budget of a fenced sync (issue 16) against a real API server.

The change under attack dry-runs objects its inventory does not list instead of reading them
(`fleet.engine.apply.Applier.probe`). It first also let a fenced sync start from a per-process
memory of its inventory instead of reading it; attacks 1 and 4 broke that (a stale holder wrote
its old revision, a deleted inventory was pruned from memory), so it was removed: every sync
reads its inventory before its first write and checks the fencing token on what it read. The
tests stay as the guard against bringing it back. Each test is one attack: a misread dry-run
answer that would let a sync take over an object, an inventory changed behind a worker's back
(another worker, a person, a stale lease holder), and the inventory write over a changed one.
Issue 12's guarantee is the yardstick: a holder whose lease a newer one took writes nothing, so
the newer revision is the one in the cluster, every time.

Real API server (the testbed), real git, the worker-like client and watch of
`test_request_budget`; the stale holder is a guard whose lease checks pass (a frozen clock)
while a newer token has written the inventory.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet.engine import sync
from fleet.engine.caches import SyncCaches
from fleet.engine.contract import NewerRequest, SyncRequest
from fleet.engine.fingerprint import fingerprint_of
from fleet.engine.inventory import InventoryEntry, InventoryStore
from fleet.engine.plan.tracking import APP_LABEL, TRACKING_ANNOTATION, Owner, mark
from fleet.errors import LeaseLost
from fleet.kube.client import KubeClient
from fleet.kube.kubeconfig import ServiceAccount
from fleet.model import ObjectRef, SyncStatus, Trigger
from tests.integration.conformance.test_wave_timeout import stuck_deployment
from tests.integration.engine.sync_helpers import Scenario, scenario_for
from tests.integration.engine.test_request_budget import (
    Guard,
    RecordingKube,
    WatchedConfigMaps,
    _cm,
    _sync,
)
from tests.support import manifests as m

WAVE_1 = '  annotations:\n    gitfleet.io/sync-wave: "1"\n'


@pytest.fixture
def labelled_index(kube: KubeClient) -> Iterator[WatchedConfigMaps]:
    """A worker's watch of labelled ConfigMaps (prune reads it instead of listing)."""
    index = WatchedConfigMaps(kube)
    index.thread.start()
    _wait_listed(index)
    yield index
    index.watch.stop()
    index.thread.join(timeout=10)


def _wait_listed(index: WatchedConfigMaps) -> None:
    deadline = time.monotonic() + 30
    while not index.watch.in_step and time.monotonic() < deadline:
        threading.Event().wait(0.05)  # the watch's first LIST
    assert index.watch.in_step, "the ConfigMap watch never listed"


@pytest.fixture
def primed(
    tmp_path: Path, kube: KubeClient, namespace: str, labelled_index: WatchedConfigMaps
) -> Iterator[Scenario]:
    """A worker-like scenario whose client and caches are warmed by a warm-up app's sync."""
    recording = RecordingKube(kube.config)
    s = scenario_for(tmp_path, recording, namespace)
    s.caches.labelled = labelled_index
    s.repo.commit({"warm/a.yaml": m.configmap("warm")})
    warm = _sync(s, "warm", app=f"warm-{namespace}", token=1)
    assert warm.error == "", warm.error
    yield s
    recording.close()


@dataclasses.dataclass
class _StaleGuard:
    """A holder whose lease a newer one took, which its lease checks have not noticed yet
    (the race the inventory's precondition closes): it cannot take a newer token."""

    token: int

    def __call__(self, step: str) -> None:
        return None

    def advance(self, past: int) -> None:
        raise LeaseLost(f"lease token {self.token} is no longer current")


def _data(kube: KubeClient, ref: ObjectRef) -> dict[str, Any] | None:
    live = kube.get(ref)
    return None if live is None else dict(live.get("data") or {})


def _inventory_names(kube: KubeClient, app: str) -> tuple[int, list[str]]:
    stored = InventoryStore(kube).read(app)
    assert stored is not None, f"no inventory for {app}"
    return stored.fence, sorted(e.ref.name for e in stored.entries)


# -- attack 1: a stale lease holder that synced the app before (issue 12) -------------------


def _newer_holder_moves_on(s: Scenario, tmp_path: Path) -> tuple[str, str]:
    """Revision `old` {a: one}; the newer revision {a: two, c} synced by another worker at
    token 30. Returns (old, new) shas."""
    old = s.repo.commit({"app/a.yaml": m.configmap("a", "v: one")})
    new = s.repo.commit({"app/a.yaml": m.configmap("a", "v: two"), "app/c.yaml": m.configmap("c")})
    newer = _sync(s, token=30, caches=SyncCaches.at(tmp_path / "newer-worker"))
    assert newer.error == "" and newer.revision == new, newer.error
    return old, new


def _assert_newer_revision_won(s: Scenario, kube: KubeClient, stale: Any) -> None:
    """Every way the stale holder could have let the older revision win, reported together."""
    wrong = []
    if stale.error_stage != "lease" or stale.sync_status == SyncStatus.SYNCED:
        wrong.append(f"the stale sync ended {stale.sync_status} at {stale.error_stage!r}")
    if _data(kube, _cm(s.namespace, "c")) is None:
        wrong.append("it pruned the object the newer revision created")
    if (a := _data(kube, _cm(s.namespace, "a"))) != {"v": "two"}:
        wrong.append(f"it wrote its older revision over the newer one (a={a})")
    if (stored := _inventory_names(kube, s.app)) != (30, ["a", "c"]):
        wrong.append(f"the inventory is {stored}, not the newer holder's")
    assert not wrong, "; ".join(wrong)


def test_a_stale_holder_that_remembers_its_own_inventory_writes_nothing(
    primed: Scenario, tmp_path: Path, kube: KubeClient
) -> None:
    """This worker synced the app at token 20 (a memory would hold the inventory it wrote); its
    lease moved, a newer worker synced the newer revision at token 30; this worker's stale sync
    of the older revision resumes with lease checks that wrongly pass. The inventory read at
    the start shows token 30 and stops it before any write."""
    s = primed
    old = s.repo.commit({"app/a.yaml": m.configmap("a", "v: one")})
    assert _sync(s, token=20).error == ""
    s.repo.commit({"app/a.yaml": m.configmap("a", "v: two"), "app/c.yaml": m.configmap("c")})
    assert _sync(s, token=30, caches=SyncCaches.at(tmp_path / "newer-worker")).error == ""

    stale = _sync(s, guard=_StaleGuard(25), revision=old)
    _assert_newer_revision_won(s, kube, stale)


def test_a_stale_holder_that_remembers_no_inventory_writes_nothing(
    primed: Scenario, tmp_path: Path, kube: KubeClient
) -> None:
    """The cold case the budget is about: the app had no inventory when this worker warmed up;
    a newer worker synced the newer revision since; this worker's stale sync of the older
    revision must still stop before it writes."""
    s = primed
    old, _ = _newer_holder_moves_on(s, tmp_path)
    stale = _sync(s, guard=_StaleGuard(25), revision=old)
    _assert_newer_revision_won(s, kube, stale)


def test_control_a_stale_holder_without_a_memory_writes_nothing(
    primed: Scenario, tmp_path: Path, kube: KubeClient
) -> None:
    """The same stale holder in a process that remembers nothing of the app reads the
    inventory, sees token 30 and stops before its first write: the guarantee every sync keeps
    (this one passed even against the memory)."""
    s = primed
    old, _ = _newer_holder_moves_on(s, tmp_path)
    fresh = SyncCaches.at(tmp_path / "fresh-process")
    stale = _sync(s, guard=_StaleGuard(25), revision=old, caches=fresh)
    _assert_newer_revision_won(s, kube, stale)


# -- attack 2: the dry-run answer of an object that exists ---------------------------------


def test_an_object_a_person_created_is_read_not_taken_as_new(
    primed: Scenario, kube: KubeClient, namespace: str
) -> None:
    """An unlabelled object created by kubectl is not in the inventory: the probe's dry-run
    answer carries its resourceVersion, so the sync reads it and decides with the live object
    (configured, not created), and the person's own field survives the apply."""
    s = primed
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "handmade", "namespace": namespace},
            "data": {"k": "person", "theirs": "kept"},
        },
        manager="kubectl-client-side-apply",
    )
    s.repo.commit({"app/handmade.yaml": m.configmap("handmade", "k: git")})
    sent = s.kube
    assert isinstance(sent, RecordingKube)
    sent.take()
    result = _sync(s, token=70)
    requests = sent.take()
    assert result.error == "", result.error
    path = f"/api/v1/namespaces/{namespace}/configmaps/handmade"
    assert f"PATCH dry-run {path}" in requests and f"GET {path}" in requests, requests
    assert requests.index(f"GET {path}") > requests.index(f"PATCH dry-run {path}")
    (handmade,) = [r for r in result.resources if r.ref.name == "handmade"]
    assert handmade.action != "created", handmade
    assert _data(kube, _cm(namespace, "handmade")) == {"k": "git", "theirs": "kept"}


def _deployer(kube: KubeClient, namespace: str, verbs: list[str]) -> ServiceAccount:
    """A ServiceAccount in `namespace` allowed only `verbs` on ConfigMaps there."""
    name = f"deployer-{uuid.uuid4().hex[:6]}"
    meta = {"name": name, "namespace": namespace}
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta})
    rbac = "rbac.authorization.k8s.io/v1"
    rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}
    kube.create({"apiVersion": rbac, "kind": "Role", "metadata": meta, "rules": [rule]})
    kube.create(
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        }
    )
    return ServiceAccount(namespace, name)


def test_a_project_account_that_may_patch_but_not_read_takes_nothing_over(
    primed: Scenario, kube: KubeClient, namespace: str
) -> None:
    """Acting as a ServiceAccount that may PATCH and create ConfigMaps but not GET them: its
    dry-run of another app's object is admitted and answers with a resourceVersion, so the
    sync falls back to a read (refused) and never applies over the other app's object."""
    s = primed
    s.repo.commit({"other/shared.yaml": m.configmap("shared", "owner: other")})
    assert _sync(s, "other", app=f"other-{namespace}").error == ""
    account = _deployer(kube, namespace, ["patch", "create"])
    acting = KubeClient(dataclasses.replace(kube.config, impersonate=account))
    try:
        s.repo.commit({"app/shared.yaml": m.configmap("shared", "owner: mine")})
        request = s.request(
            "app",
            prune=True,
            trigger=Trigger.INTERVAL,
            guard=Guard(80),
            service_account=account,
        )
        taken = sync.run(request, kube=acting, caches=s.caches, own=s.kube)
    finally:
        acting.close()
    print("refused:", taken.error_stage, taken.error)
    assert taken.error != "", "a sync that may not read another app's object succeeded"
    live = kube.get(_cm(namespace, "shared"))
    assert live is not None and live["data"] == {"owner": "other"}
    assert f"other-{namespace}" in live["metadata"]["annotations"][TRACKING_ANNOTATION]


def test_a_project_account_that_may_not_read_still_creates_a_new_object(
    primed: Scenario, kube: KubeClient, namespace: str
) -> None:
    """The positive twin: for an object that does not exist the admitted dry-run is the whole
    decision, so an account without GET can still create it."""
    s = primed
    account = _deployer(kube, namespace, ["patch", "create"])
    acting = KubeClient(dataclasses.replace(kube.config, impersonate=account))
    try:
        s.repo.commit({"app/fresh.yaml": m.configmap("fresh", "owner: mine")})
        request = s.request(
            "app", prune=True, trigger=Trigger.INTERVAL, guard=Guard(81), service_account=account
        )
        made = sync.run(request, kube=acting, caches=s.caches, own=s.kube)
    finally:
        acting.close()
    assert made.error == "", made.error
    assert _data(kube, _cm(namespace, "fresh")) == {"owner": "mine"}


# -- attack 3: the inventory written by another worker or a person ------------------------


def test_a_lease_that_moved_away_and_back_records_the_current_revision(
    primed: Scenario, tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    """The lease moved away and back (this worker's token is the newest): the sync reads the
    inventory the other worker wrote before anything else, prunes what that worker added and
    this revision drops, writes the inventory once, and applies nothing twice."""
    s = primed
    s.repo.commit({"app/a.yaml": m.configmap("a")})
    assert _sync(s, token=20).error == ""
    s.repo.commit({"app/c.yaml": m.configmap("c")})
    assert _sync(s, token=30, caches=SyncCaches.at(tmp_path / "other-worker")).error == ""
    head = s.repo.commit({"app/c.yaml": None, "app/a.yaml": m.configmap("a", "v: three")})
    sent = s.kube
    assert isinstance(sent, RecordingKube)
    sent.take()

    result = _sync(s, token=40)
    requests = sent.take()
    print("requests:", *requests, sep="\n  ")
    assert result.error == "", result.error
    assert (result.sync_status, result.revision) == (SyncStatus.SYNCED, head)
    a_path = f"/api/v1/namespaces/{namespace}/configmaps/a"
    assert requests.count(f"PATCH {a_path}") == 1, requests
    inventory = f"/api/v1/namespaces/gitfleet-system/configmaps/gitfleet-inventory-{s.app}"
    assert requests[0] == f"GET {inventory}", requests  # read before the first write
    writes = [r for r in requests if r in (f"PATCH {inventory}",) or r.startswith("POST ")]
    assert len(writes) == 1, requests  # written once, over what it read
    assert _data(kube, _cm(namespace, "c")) is None
    assert _inventory_names(kube, s.app) == (40, ["a"])


class InterferingKube(RecordingKube):
    """After the sync reads the inventory, a person edits it (a real write through another
    client), so the write over what the sync read is refused: the sync must end, not loop."""

    def __init__(self, *args: Any, target: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.target = target
        self.person = KubeClient(self.config)
        self.edits = 0

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        obj: str = "",
    ) -> Any:
        answer = super().request(
            method, path, body=body, params=params, content_type=content_type, obj=obj
        )
        if method == "GET" and self.target and path.endswith(self.target):
            self.edits += 1
            self.person.request(
                "PATCH",
                path,
                body={"metadata": {"annotations": {"touched": str(self.edits)}}},
                content_type="application/merge-patch+json",
            )
        return answer


def test_a_retry_refused_again_ends_without_recording_synced(
    primed: Scenario, tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    s = primed
    s.repo.commit({"app/a.yaml": m.configmap("a")})
    assert _sync(s, token=20).error == ""
    assert _sync(s, token=30, caches=SyncCaches.at(tmp_path / "other-worker")).error == ""
    s.repo.commit({"app/b.yaml": m.configmap("b")})
    interfering = InterferingKube(kube.config, target=f"gitfleet-inventory-{s.app}")
    try:
        here = dataclasses.replace(s, kube=interfering)
        result = _sync(here, token=40)
    finally:
        interfering.person.close()
        interfering.close()
    print("refused again:", result.error_stage, result.error)
    assert result.error != "" and result.sync_status != SyncStatus.SYNCED, result
    # read at the start, and once more after the refused write (written since by an older
    # token? then it writes over it once): never a loop
    assert interfering.edits == 2, f"the sync read the inventory {interfering.edits} times"
    fence, _ = _inventory_names(kube, s.app)
    assert fence == 30


# -- attack 4: an inventory a person deleted ---------------------------------------------


@pytest.mark.parametrize("process", ["same", "fresh"])
def test_an_inventory_a_person_deleted_is_rebuilt_as_a_read_would(
    primed: Scenario, tmp_path: Path, kube: KubeClient, namespace: str, process: str
) -> None:
    """A person deletes the inventory (the documented way to rebuild it from the labelled
    objects) after detaching `c` from the app (its app label removed), and the app drops `c`.
    A sync that reads finds no inventory and no label, so `c` is left alone; one that starts
    from a memory of the deleted inventory (the `same` process synced it before) must not
    prune it either. The `fresh` process (no earlier sync of the app) is the control."""
    s = primed
    s.repo.commit({"app/a.yaml": m.configmap("a"), "app/c.yaml": m.configmap("c")})
    assert _sync(s, token=90).error == ""
    assert kube.delete(InventoryStore(kube).ref(s.app))
    kube.request(
        "PATCH",
        kube.object_path(_cm(namespace, "c")),
        body={"metadata": {"labels": {APP_LABEL: None}}},
        content_type="application/merge-patch+json",
    )
    s.repo.commit({"app/c.yaml": None})
    caches = s.caches if process == "same" else SyncCaches.at(tmp_path / "fresh-process")
    caches.labelled = s.caches.labelled
    result = _sync(s, token=91, caches=caches)
    assert result.error == "", result.error
    assert _data(kube, _cm(namespace, "c")) is not None, (
        "pruned from the memory of an inventory a person deleted"
    )
    assert _inventory_names(kube, s.app) == (91, ["a"])


# -- attack 5: the namespace GET skipped after an admitted dry-run -------------------------


def test_a_missing_namespace_is_still_created_when_asked(
    primed: Scenario, kube: KubeClient
) -> None:
    """With create_namespace, the namespace GET is skipped only when a dry-run create in it
    was admitted (NamespaceLifecycle refuses one in a missing namespace): a cold sync into a
    namespace that does not exist must still create it and then its object."""
    s = primed
    target = f"t-new-{uuid.uuid4().hex[:8]}"
    s.repo.commit({"app/a.yaml": m.configmap("a")})
    try:
        request = s.request(
            "app",
            prune=True,
            trigger=Trigger.INTERVAL,
            guard=Guard(95),
            namespace=target,
            create_namespace=True,
            app=f"ns-{s.namespace}",
        )
        result = sync.run(request, kube=s.kube, caches=s.caches)
        assert result.error == "", result.error
        assert kube.get(ObjectRef("", "v1", "Namespace", "", target)) is not None
        assert _data(kube, _cm(target, "a")) == {"k": "v"}
    finally:
        kube.delete(ObjectRef("", "v1", "Namespace", "", target))


# -- attack 6: a first sync that presumes there is no inventory (`SyncRequest.first_sync`) ----


def _inventory_path(app: str) -> str:
    return f"/api/v1/namespaces/gitfleet-system/configmaps/gitfleet-inventory-{app}"


def test_a_stale_holder_of_the_first_lease_writes_nothing(
    primed: Scenario, tmp_path: Path, kube: KubeClient
) -> None:
    """The instance's first lease (token 1) was taken over by a newer worker, which synced the
    newer revision at token 30; the first holder resumes its sync of the older revision,
    presuming no inventory. Its claim is refused (409: the newer one's inventory exists), it
    reads token 30 and stops before writing any object."""
    s = primed
    old, _ = _newer_holder_moves_on(s, tmp_path)
    stale = _sync(s, guard=_StaleGuard(1), revision=old, first_sync=True)
    _assert_newer_revision_won(s, kube, stale)


def test_a_wrong_presumption_reads_the_inventory_and_still_prunes(
    primed: Scenario, kube: KubeClient, namespace: str
) -> None:
    """The registry lost its tokens (a Redis restored from an old backup): the instance's
    lease is at token 1 again, though the app synced {a, c} at token 5. Presuming no inventory
    must not make the sync forget what it owns: the refused claim makes it read the
    inventory, move its token past 5, decide again with it and prune `c`, which the newer
    revision drops."""
    s = primed
    s.repo.commit({"app/a.yaml": m.configmap("a"), "app/c.yaml": m.configmap("c")})
    assert _sync(s, token=5).error == ""
    head = s.repo.commit({"app/c.yaml": None})
    result = _sync(s, token=1, first_sync=True)
    assert result.error == "", result.error
    assert (result.sync_status, result.revision) == (SyncStatus.SYNCED, head)
    assert _data(kube, _cm(namespace, "c")) is None, "c was left although the app dropped it"
    assert _data(kube, _cm(namespace, "a")) is not None
    assert _inventory_names(kube, s.app) == (6, ["a"])


def test_a_first_sync_replaces_the_inventory_a_deleted_app_of_the_same_name_left(
    primed: Scenario, kube: KubeClient, namespace: str
) -> None:
    """An app was deleted without its inventory being removed, and a new app of the same
    name syncs for the first time: its claim is refused, it reads an inventory that is not
    its own (another uid), owns nothing of it, and replaces it with its own."""
    s = primed
    s.repo.commit({"app/old.yaml": m.configmap("old")})
    assert _sync(s, token=3, app_uid="uid-of-the-deleted-app").error == ""
    s.repo.commit({"app/old.yaml": None, "app/new.yaml": m.configmap("new")})
    result = _sync(s, token=1, first_sync=True, app_uid="uid-of-the-new-app")
    assert result.error == "", result.error
    stored = InventoryStore(kube).read(s.app)
    assert stored is not None and stored.uid == "uid-of-the-new-app", stored
    assert [e.ref.name for e in stored.entries] == ["new"]
    assert _data(kube, _cm(namespace, "old")) is not None, "pruned another app's object"


def test_a_first_sync_that_creates_its_namespace_reads_the_inventory_before(
    primed: Scenario, kube: KubeClient
) -> None:
    """An object in a namespace the sync creates cannot be dry-run until that namespace is
    written, before the validation ends: that early write must not come before the inventory
    check either, so the sync reads the inventory first instead of claiming it after."""
    s = primed
    ns = f"{s.namespace}-new"
    s.repo.commit({"app/a.yaml": m.configmap("a")})
    sent = s.kube
    assert isinstance(sent, RecordingKube)
    sent.take()
    try:
        result = _sync(s, token=1, first_sync=True, create_namespace=True, namespace=ns)
        requests = sent.take()
        print("requests:", *requests, sep="\n  ")
        assert result.error == "", result.error
        writes = [i for i, r in enumerate(requests) if not r.startswith(("GET", "PATCH dry-run"))]
        first_write = writes[0]
        reads = requests[:first_write]
        assert requests[first_write] == f"PATCH /api/v1/namespaces/{ns}", requests
        assert f"GET {_inventory_path(s.app)}" in reads, requests
        assert _inventory_names(kube, s.app) == (1, ["a"])
    finally:
        kube.delete(ObjectRef("", "v1", "Namespace", "", ns))


def test_a_legacy_app_first_sync_decides_again_with_its_inventory(
    primed: Scenario, kube: KubeClient, namespace: str
) -> None:
    """An app older than uids (legacy tracking ids, a legacy inventory) gets lease token 1
    after a registry import: presuming no inventory, its own objects look like another
    app's; the sync must read the inventory and decide again, not fail."""
    s = primed
    app = f"legacy-{namespace}"
    s.repo.commit({"app/kept.yaml": m.configmap("kept")})
    for name in ("kept", "dropped"):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
        body["metadata"]["namespace"] = namespace
        kube.apply(mark(body, Owner(app)))
    InventoryStore(kube).save(Owner(app), [InventoryEntry(_cm(namespace, "kept"), 0)])
    result = _sync(s, app=app, app_uid="uid-legacy", adopt_legacy=True, token=1, first_sync=True)
    assert result.error == "", result.error
    stored = InventoryStore(kube).read(app)
    assert stored is not None and stored.uid == "uid-legacy", stored


@dataclasses.dataclass
class _RacyStaleGuard:
    """A stale holder whose lease check passes once, right before its inventory claim (the
    race), and fails at every later check."""

    token: int

    def __call__(self, step: str) -> None:
        if step != "the inventory claim":
            raise LeaseLost(f"lease token {self.token} is no longer current before {step}")

    def advance(self, past: int) -> None:
        raise LeaseLost(f"lease token {self.token} is no longer current")


def test_a_stale_claim_racing_the_current_holder_does_not_fail_it(
    primed: Scenario, kube: KubeClient, namespace: str
) -> None:
    """The current holder (token 2) read no inventory; then a stale first holder's claim (token
    1, the older revision) lands before the current one records. The current holder must
    still succeed and leave its own inventory, not fail on the stale one's."""
    s = primed
    old = s.repo.commit({"app/a.yaml": m.configmap("a", "v: one")})
    s.repo.commit({"app/a.yaml": m.configmap("a", "v: two"), "app/c.yaml": m.configmap("c")})
    stale: list[Any] = []

    @dataclasses.dataclass
    class Current:
        token: int

        def __call__(self, step: str) -> None:
            if not stale:  # at the current holder's first lease check, after its read
                request = s.request(
                    "app",
                    prune=True,
                    trigger=Trigger.INTERVAL,
                    guard=_RacyStaleGuard(1),
                    first_sync=True,
                    revision=old,
                )
                stale.append(sync.run(request, kube=s.kube, caches=s.caches))

        def advance(self, past: int) -> None:
            self.token = max(self.token, past + 1)

    current = _sync(s, guard=Current(2))
    assert stale[0].error_stage == "lease", stale[0].error
    assert current.error == "", current.error
    assert _data(kube, _cm(namespace, "a")) == {"v": "two"}
    assert _inventory_names(kube, s.app) == (2, ["a", "c"])


def test_a_first_sync_re_planned_at_a_newer_revision_keeps_its_note(
    primed: Scenario, kube: KubeClient
) -> None:
    """A first sync claims the inventory, then a newer revision cancels its health wait: the
    re-plan must not presume again (its own claim would be refused) and the result still
    says what was cancelled."""
    s = primed
    s.repo.commit(
        {
            "app/web.yaml": stuck_deployment("web"),
            "app/later.yaml": m.configmap("later", "rev: a", extra_meta=WAVE_1),
        }
    )
    pushed: list[str] = []

    def newer() -> NewerRequest | None:
        if not pushed and s.get("apps/v1", "Deployment", "web") is not None:
            change = {"app/web.yaml": None, "app/later.yaml": m.configmap("later", "rev: b")}
            pushed.append(s.repo.commit(change))
        return NewerRequest("HEAD", "push-1") if pushed else None

    result = _sync(s, token=1, first_sync=True, newer=newer)
    assert result.error == "", result.error
    assert (result.revision, result.sync_status) == (pushed[0], SyncStatus.SYNCED)
    assert "re-planned" in result.message, result.message
    assert _inventory_names(kube, s.app) == (1, ["later"])


def test_the_first_sync_hint_leaves_the_fingerprint_alone() -> None:
    """The next periodic check compares fingerprints: a first sync's must be the same."""
    request = SyncRequest(app="x", repo="r", path="p")
    hinted = dataclasses.replace(request, first_sync=True)
    assert fingerprint_of(request, "k") == fingerprint_of(hinted, "k")
