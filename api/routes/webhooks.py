"""/api/v1/webhooks/git: GitHub-style push events, verified by HMAC: refresh hints for their apps.

The signature (`X-Hub-Signature-256: sha256=<hex>`) is an HMAC-SHA256 of the raw body, checked in
constant time against GITFLEET_WEBHOOK_SECRET and every project's own `webhookSecret` before the
body is parsed (`fleet.control.deliveries.signers`); none verifying is a 401. A project's secret
reaches that project's apps only, and the global secret the apps of every project without one,
so one team's secret cannot trigger another's apps. With no secret configured at all, every
event is refused (503): an unverified webhook would let anyone on the network trigger syncs.

A push is a refresh hint, never the source of the revision: the syncs it asks for carry no
revision, so each app resolves its own tracked ref from git (the worker fetches it), and the
payload's `after` (a commit of any branch, or an old one) is never deployed for being named
there. Each delivery is accepted once (`X-GitHub-Delivery`, required, remembered for a day: a
second copy is a 409), and not at all when the signed body says the push is older than
GITFLEET_WEBHOOK_MAX_AGE (`repository.pushed_at`, 422); see `fleet.control.deliveries`.

An app matches when its repository names the pushed one
(`fleet.control.registry.repos.normalize_repo`, so HTTPS and SSH URLs agree) and its revision is
the pushed branch or tag, or HEAD when the push went to the default branch: a push to another
ref syncs nothing for it. Only automated apps sync on a push (a manual app waits for a person,
as in Argo CD), and only when their sync windows allow automated syncs; the answer lists the
triggered apps and, with the reason, the matching ones skipped. An app whose record cannot be
evaluated (a stored sync window that never opens) is skipped with the reason; it never fails the
delivery for the other apps.

A push syncs only the instances it can change (`fleet.control.pushes`): when the payload lists the
changed files, an instance whose last sync matched a commit on the chain of recorded pushes,
and whose render read none of the changed paths, gets no job at all; the answer lists its app
under `unchanged`. So a push to a monorepo of 10,000 apps costs one sync, not 10,000 checks.
Without a file list (or after a forced push) every matching instance syncs, and the ones the
push left alone answer from the worker's quiet check, rendering nothing. Each secret keeps its
own chain of pushes, so one project's deliveries never decide what another's apps skip.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from api.deps import DispatcherDep, SettingsDep, StoreDep
from api.settings import Settings
from api.syncs import request_syncs
from fleet.control.commitclock import CommitClock
from fleet.control.deliveries import Deliveries, Signers, signers, too_old
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
DELIVERY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_SHA = re.compile(r"[0-9a-f]{40}")
_SPECS = Specs()  # app record hashes, reused across pushes while the records are unchanged


@dataclass(frozen=True)
class PushEvent:
    """A parsed push: the repository's normalized URLs, the ref, the default branch, `after`
    when it names a commit, and the payload for the fields read once (age, changed files)."""

    urls: frozenset[str]
    ref: str
    default_branch: str
    after: str | None
    payload: dict[str, Any]


def verify(store: Store, settings: Settings, body: bytes, signature: str | None) -> Signers:
    """Which secrets signed `body`: 503 when there is none to check, 401 when none verifies."""
    own = store.webhook_secrets()
    secret = Settings.reveal(settings.webhook_secret)
    if not secret and not own:
        raise HTTPException(
            503, "webhooks are disabled: set GITFLEET_WEBHOOK_SECRET or a project's webhookSecret"
        )
    found = signers(body, signature or "", global_secret=secret, projects=own)
    if not found.any():
        raise HTTPException(401, "X-Hub-Signature-256: missing or wrong signature")
    return found


def delivery_id(value: str | None) -> str:
    if value is None or not DELIVERY_ID.fullmatch(value):
        raise HTTPException(
            422,
            "X-GitHub-Delivery: missing or not an id (letters, digits, '.', '_', '-'); each "
            "delivery needs its own, as GitHub and Gitea send",
        )
    return value


def parse_push(body: bytes) -> PushEvent:
    """The push event in `body`; 422 naming the field."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
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
    after = payload.get("after")
    commit = (
        after if isinstance(after, str) and _SHA.fullmatch(after) and after.strip("0") else None
    )
    branch = str(repo.get("default_branch") or "")
    return PushEvent(frozenset(urls), ref, branch, commit, payload)


def revision_matches(revision: str, ref: str, default_branch: str) -> bool:
    kind, _, name = ref.removeprefix("refs/").partition("/")
    if revision in (ref, name):
        return True
    return kind == "heads" and revision in ("HEAD", "") and name == default_branch


def accept(
    store: Store,
    dispatcher: DispatcherDep,
    settings: Settings,
    body: bytes,
    *,
    signed: Signers,
    delivery: str,
) -> dict[str, Any]:
    """Refuse an old or repeated delivery, then trigger the apps it reaches."""
    push = parse_push(body)
    stale = too_old(push.payload, datetime.now(UTC), settings.webhook_max_age_s)
    if stale:
        raise HTTPException(422, stale)
    deliveries = Deliveries(store.redis, prefix=store.keys.p)
    if not deliveries.first(delivery):
        raise HTTPException(
            409, f"X-GitHub-Delivery: delivery {delivery} was accepted already; nothing to do"
        )
    try:
        return _trigger(store, dispatcher, push, signed)
    except BaseException:
        deliveries.forget(delivery)  # nothing was done: the host may deliver it again
        raise


def _trigger(
    store: Store, dispatcher: DispatcherDep, push: PushEvent, signed: Signers
) -> dict[str, Any]:
    matching = [
        app
        for app in store.list_apps_cached()
        if signed.covers(app.project)
        and normalize_repo(app.source.repo) in push.urls
        and revision_matches(app.source.revision, push.ref, push.default_branch)
    ]
    if matching and push.after:  # the commit-to-healthy clock starts at the receipt
        CommitClock(store.redis, store.keys).pushed(push.urls, push.after)
    clusters = store.list_clusters()
    targets = {app.name: store.instances(app, clusters) for app in matching}
    triggered, skipped, unchanged, jobs = [], [], [], []
    candidates = []
    for app in matching:
        reason = _skip_reason(app, targets[app.name])
        if reason:
            skipped.append({"app": app.name, "reason": reason})
        else:
            candidates.append(app)
    left_alone = _unaffected(store, candidates, targets, push, signed)
    for app in candidates:
        due = [c for c in targets[app.name] if instance_key(app.name, c) not in left_alone]
        if not due:
            unchanged.append(app.name)
            continue
        reason = _blocked(app)  # windows last: evaluating them is the costly part
        if reason:
            skipped.append({"app": app.name, "reason": reason})
            continue
        enqueued = request_syncs(dispatcher, app, due, trigger=Trigger.WEBHOOK)
        triggered.append(app.name)
        jobs += [{"app": app.name, **asdict(job)} for job in enqueued.jobs()]
    log.info(
        "push to %s %s triggered %s (%d apps unchanged)",
        *(sorted(push.urls), push.ref, triggered or "no app", len(unchanged)),
    )
    return {
        "ref": push.ref,
        "triggered": triggered,
        "skipped": skipped,
        "unchanged": unchanged,
        "jobs": jobs,
    }


def _unaffected(
    store: Store,
    apps: list[AppRecord],
    targets: dict[str, list[str]],
    push: PushEvent,
    signed: Signers,
) -> set[str]:
    """Instances this push cannot change; records the push for the next one, in the chain of
    each secret that signed it (`fleet.control.pushes`)."""
    paths, before = changed_paths(push.payload), push.payload.get("before")
    if (
        push.after is None
        or paths is None
        or not (isinstance(before, str) and _SHA.fullmatch(before))
    ):
        return set()
    pushes = PushLog(store.redis, prefix=store.keys.p)
    by_chain: dict[tuple[str, str], list[str]] = {}
    specs: dict[str, str] = {}
    for app in apps:
        instances = [instance_key(app.name, c) for c in targets[app.name]]
        chain = (normalize_repo(app.source.repo), _chain_of(app.project, signed))
        by_chain.setdefault(chain, []).extend(instances)
        specs.update(dict.fromkeys(instances, _SPECS.of(app)))
    _SPECS.keep(apps)
    found: set[str] = set()
    for (repo, project), instances in by_chain.items():
        pushes.record(repo, push.ref, Push(before, push.after, paths), project=project)
        synced = pushes.synced(repo, instances)
        recorded = pushes.chain(repo, push.ref, project=project)
        found |= unaffected(recorded, push.after, synced, specs)
    return found


def _chain_of(project: str, signed: Signers) -> str:
    """The push chain an app of `project` reads: its project's own, or the global one ("")."""
    return project if project in signed.owned else ""


def _skip_reason(app: AppRecord, clusters: list[str]) -> str:
    """Why a push never syncs `app`, from its record alone (its sync windows: `_blocked`)."""
    if app.deleting:
        return "being deleted"
    if not app.sync_policy.automated:
        return "automated sync is off; sync it by hand"
    if not clusters:
        return "targets no registered cluster"
    return ""


def _blocked(app: AppRecord) -> str:
    """Why `app`'s sync windows hold a push's sync now ("" when they do not)."""
    try:
        return blocked_reason(app, Trigger.WEBHOOK, datetime.now(UTC))
    except Exception as e:  # one app's record must never fail the delivery for the others
        log.exception("app=%s cannot be evaluated for a push", app.name)
        return f"not synced: app {app.name} cannot be evaluated ({e}); fix it with PUT"


@router.post("/git")
async def git_push(
    request: Request, store: StoreDep, dispatcher: DispatcherDep, settings: SettingsDep
) -> dict[str, Any]:
    body = await request.body()  # at most the webhook body limit (`api.gate`)
    signature = request.headers.get("X-Hub-Signature-256")
    signed = await run_in_threadpool(verify, store, settings, body, signature)
    if request.headers.get("X-GitHub-Event", "push") == "ping":
        return {"ref": "", "triggered": [], "skipped": [], "jobs": []}
    delivery = delivery_id(request.headers.get("X-GitHub-Delivery"))
    return await run_in_threadpool(
        accept, store, dispatcher, settings, body, signed=signed, delivery=delivery
    )
