"""/api/v1/webhooks/git: GitHub-style push events, verified by HMAC, trigger matching apps.

The signature (`X-Hub-Signature-256: sha256=<hex>`) is an HMAC-SHA256 of the raw body with
GITFLEET_WEBHOOK_SECRET, compared in constant time before the body is even parsed; a wrong or
missing one is a 401. Without a configured secret every event is refused (503): an unverified
webhook would let anyone on the network trigger syncs.

An app matches when its repository names the pushed one (`fleet.control.policy.normalize_repo`, so
HTTPS and SSH URLs agree) and its revision is the pushed branch or tag, or HEAD when the push
went to the default branch. Only automated apps sync on a push (a manual app waits for a
person, as in Argo CD), and only when their sync windows allow automated syncs; the answer
lists the triggered apps and, with the reason, the matching ones skipped.

A push syncs only the instances it can change (`fleet.control.pushes`): when the payload lists the
changed files, an instance whose last sync matched a commit on the chain of recorded pushes,
and whose render read none of the changed paths, gets no job at all; the answer lists its app
under `unchanged`. So a push to a monorepo of 10,000 apps costs one sync, not 10,000 checks.
Without a file list (or after a forced push) every matching instance syncs, and the ones the
push left alone answer from the worker's quiet check, rendering nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from api.deps import DispatcherDep, SettingsDep, StoreDep
from api.settings import Settings
from api.syncs import request_syncs
from fleet.control.policy import blocked_reason
from fleet.control.pushes import Push, PushLog, Specs, changed_paths, unaffected
from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import AppRecord
from fleet.control.registry.repos import normalize_repo
from fleet.control.registry.store import Store
from fleet.model import Trigger

log = logging.getLogger("api.webhooks")
router = APIRouter(prefix="/webhooks", tags=["webhooks"])
URL_FIELDS = ("clone_url", "html_url", "ssh_url", "git_url", "url", "svn_url")
_SPECS = Specs()  # app record hashes, reused across pushes while the records are unchanged


def verify(settings: Settings, body: bytes, signature: str | None) -> None:
    secret = Settings.reveal(settings.webhook_secret)
    if not secret:
        raise HTTPException(503, "webhooks are disabled: set GITFLEET_WEBHOOK_SECRET")
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), (signature or "").encode()):
        raise HTTPException(401, "X-Hub-Signature-256: missing or wrong signature")


def parse_push(body: bytes) -> tuple[set[str], str, str]:
    """(normalized repo URLs, ref, default branch) of a push payload; 422 naming the field."""
    try:
        payload = json.loads(body)
    except ValueError:
        raise HTTPException(422, "body: not JSON") from None
    repo = payload.get("repository") if isinstance(payload, dict) else None
    if not isinstance(repo, dict):
        raise HTTPException(422, "repository: missing from the push event")
    ref = payload.get("ref")
    if not isinstance(ref, str) or not ref.startswith("refs/"):
        raise HTTPException(422, "ref: missing, or not like refs/heads/<branch>")
    urls = {normalize_repo(str(repo[f])) for f in URL_FIELDS if isinstance(repo.get(f), str)}
    if not urls:
        raise HTTPException(422, "repository: has no clone_url, html_url or ssh_url")
    return urls, ref, str(repo.get("default_branch") or "")


def revision_matches(revision: str, ref: str, default_branch: str) -> bool:
    kind, _, name = ref.removeprefix("refs/").partition("/")
    if revision in (ref, name):
        return True
    return kind == "heads" and revision in ("HEAD", "") and name == default_branch


def _trigger(store: Store, dispatcher: DispatcherDep, body: bytes) -> dict[str, Any]:
    urls, ref, default_branch = parse_push(body)
    pushed = pushed_commit(body)
    matching = [
        app
        for app in store.list_apps_cached()
        if normalize_repo(app.source.repo) in urls
        and revision_matches(app.source.revision, ref, default_branch)
    ]
    clusters = store.list_clusters()
    targets = {app.name: store.instances(app, clusters) for app in matching}
    left_alone = _unaffected(store, matching, targets, ref, json.loads(body), pushed)
    triggered, skipped, unchanged, jobs = [], [], [], []
    for app in matching:
        reason = _skip_reason(app, targets[app.name])
        if reason:
            skipped.append({"app": app.name, "reason": reason})
            continue
        due = [c for c in targets[app.name] if instance_key(app.name, c) not in left_alone]
        if not due:
            unchanged.append(app.name)
            continue
        enqueued = request_syncs(dispatcher, app, due, trigger=Trigger.WEBHOOK, revision=pushed)
        triggered.append(app.name)
        jobs += [{"app": app.name, **job} for job in enqueued.jobs()]
    log.info(
        "push to %s %s triggered %s (%d apps unchanged)",
        *(sorted(urls), ref, triggered or "no app", len(unchanged)),
    )
    return {
        "ref": ref,
        "triggered": triggered,
        "skipped": skipped,
        "unchanged": unchanged,
        "jobs": jobs,
    }


def _unaffected(
    store: Store,
    apps: list[AppRecord],
    targets: dict[str, list[str]],
    ref: str,
    payload: dict[str, Any],
    pushed: str | None,
) -> set[str]:
    """Instances this push cannot change; records the push for the next one
    (`fleet.control.pushes`)."""
    paths, before = changed_paths(payload), payload.get("before")
    if pushed is None or paths is None or not _is_sha(before):
        return set()
    pushes = PushLog(store.redis, prefix=store.keys.p)
    by_repo: dict[str, list[str]] = {}
    specs: dict[str, str] = {}
    for app in apps:
        instances = [instance_key(app.name, c) for c in targets[app.name]]
        by_repo.setdefault(normalize_repo(app.source.repo), []).extend(instances)
        specs.update(dict.fromkeys(instances, _SPECS.of(app)))
    _SPECS.keep(apps)
    found: set[str] = set()
    for repo, instances in by_repo.items():
        pushes.record(repo, ref, Push(str(before), pushed, paths))
        synced = pushes.synced(repo, instances)
        found |= unaffected(pushes.chain(repo, ref), pushed, synced, specs)
    return found


def _is_sha(value: object) -> bool:
    return isinstance(value, str) and bool(re.fullmatch(r"[0-9a-f]{40}", value))


def pushed_commit(body: bytes) -> str | None:
    """The commit the push moved the ref to: every app it triggers syncs exactly that commit,
    so the first sync fetches it and the others find it in the cache (one fetch per push)."""
    try:
        after = json.loads(body).get("after")
    except (ValueError, AttributeError):
        return None
    if isinstance(after, str) and re.fullmatch(r"[0-9a-f]{40}", after) and after.strip("0"):
        return after
    return None


def _skip_reason(app: AppRecord, clusters: list[str]) -> str:
    if app.deleting:
        return "being deleted"
    if not app.sync_policy.automated:
        return "automated sync is off; sync it by hand"
    if not clusters:
        return "targets no registered cluster"
    return blocked_reason(app, Trigger.WEBHOOK, datetime.now(UTC))


@router.post("/git")
async def git_push(
    request: Request, store: StoreDep, dispatcher: DispatcherDep, settings: SettingsDep
) -> dict[str, Any]:
    body = await request.body()
    verify(settings, body, request.headers.get("X-Hub-Signature-256"))
    if request.headers.get("X-GitHub-Event", "push") == "ping":
        return {"ref": "", "triggered": [], "skipped": [], "jobs": []}
    return await run_in_threadpool(_trigger, store, dispatcher, body)
