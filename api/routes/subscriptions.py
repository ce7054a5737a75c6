"""/subscriptions: who is told of which app events, where; and what was delivered.

`POST /subscriptions` `{"name", "kind": "webhook"|"slack", "project" | "app", "events": [...],
"url", "secret"}` subscribes every app of a project, or one app, to the events listed (empty:
all; the names are in `fleet.control.notifications.events`). A `webhook` needs a `secret`: each
message is signed with HMAC-SHA256 of the raw body in `X-Gitfleet-Signature-256:
sha256=<hex>`; a `slack` URL gets `{"text": ...}` and takes no secret. The URL is checked
against the target rules (`fleet.control.notifications.targets`: https, no inside address
unless the operator lists the host in GITFLEET_NOTIFY_ALLOW_HOSTS; 422 naming the rule). The
URL and the secret are stored encrypted and never returned: answers show the URL's scheme and
host only.

`GET /subscriptions/{name}/deliveries` lists the newest deliveries (time, event, app, cluster,
status pending/retrying/delivered/failed, attempts, the last HTTP status code, the last error).

Admins manage every subscription; a project's members manage those of their project (an app
subscription belongs to its app's project, stored with it with the app's uid when it is made, so
it never follows the app's name into another project); viewers read.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Depends, HTTPException, Query, Response
from pydantic import Field, SecretStr

from api.auth import Principal, authorize, can_see, require_project, require_writer
from api.deps import SettingsDep, StoreDep
from api.schemas import ApiModel, Name
from fleet.control.notifications.events import EVENTS
from fleet.control.notifications.outbox import DeliveryResult, Outbox
from fleet.control.notifications.subscriptions import (
    KINDS,
    Subscription,
    Subscriptions,
    Target,
)
from fleet.control.notifications.targets import TargetPolicy, TargetUrlError
from fleet.control.registry.errors import InvalidReference, NotFound
from fleet.control.registry.store import Store

log = logging.getLogger("api.subscriptions")
router = APIRouter(
    prefix="/subscriptions", tags=["notifications"], dependencies=[Depends(authorize)]
)


class SubscriptionIn(ApiModel):
    name: Name
    kind: str = "webhook"
    project: str = ""
    app: str = ""
    events: list[str] = Field(default_factory=list, max_length=len(EVENTS))
    url: SecretStr
    secret: SecretStr | None = None


class SubscriptionOut(ApiModel):
    name: str
    kind: str
    project: str = ""
    app: str = ""
    events: list[str]
    url: str  # scheme and host only
    has_secret: bool
    created: str = ""

    @classmethod
    def of(cls, subscription: Subscription) -> SubscriptionOut:
        return cls(
            name=subscription.name,
            kind=subscription.kind,
            project=subscription.project,
            app=subscription.app,
            events=list(subscription.events),
            url=subscription.shown_url,
            has_secret=subscription.kind == "webhook",
            created=subscription.created,
        )


class DeliveryOut(ApiModel):
    id: str
    event: str
    app: str
    cluster: str
    status: str
    attempts: int
    status_code: int
    error: str
    created: str
    updated: str

    @classmethod
    def of(cls, result: DeliveryResult) -> DeliveryOut:
        return cls(
            id=result.id,
            event=result.event,
            app=result.app,
            cluster=result.cluster,
            status=result.status,
            attempts=result.attempts,
            status_code=result.status_code,
            error=result.error,
            created=result.created,
            updated=result.updated,
        )


def _subscriptions(store: Store) -> Subscriptions:
    return Subscriptions(store.redis, store.keys, store.box)


def _project_of(store: Store, subscription: Subscription) -> str:
    """The project a subscription belongs to: the one stored with it (an app subscription keeps
    its app's project, even once the app is gone or its name is reused elsewhere). One stored
    before that: its app's, if it is still the same app, else "" (admins only)."""
    if subscription.project:
        return subscription.project
    try:
        app = store.get_app(subscription.app)
    except NotFound:
        return ""
    newer = app.created and subscription.created and app.created > subscription.created
    return "" if newer else app.project


def _check(body: SubscriptionIn, store: Store, policy: TargetPolicy) -> tuple[Target, str, str]:
    """The target, and for an app subscription the app's project and uid (else "", "")."""
    if body.kind not in KINDS:
        raise HTTPException(422, f"kind: {body.kind!r} is not one of {', '.join(KINDS)}")
    if bool(body.project) == bool(body.app):
        raise HTTPException(422, "give exactly one of project (all its apps) or app")
    unknown = [e for e in body.events if e not in EVENTS]
    if unknown:
        raise HTTPException(422, f"events: {unknown[0]!r} is not one of {', '.join(EVENTS)}")
    secret = body.secret.get_secret_value() if body.secret else ""
    if body.kind == "webhook" and not secret:
        raise HTTPException(422, "secret: a webhook subscription needs a secret to sign with")
    if body.kind == "slack" and secret:
        raise HTTPException(422, "secret: a slack subscription takes no secret (its URL is one)")
    url = body.url.get_secret_value()
    try:
        policy.check(url)
    except TargetUrlError as e:
        raise HTTPException(422, str(e)) from None
    if body.project:
        try:
            store.get_project(body.project)
        except NotFound:
            raise InvalidReference("project", f"no project named {body.project}") from None
    if body.app:
        try:
            app = store.get_app(body.app)
        except NotFound:
            raise InvalidReference("app", f"no app named {body.app}") from None
        return Target(url, secret), app.project, app.owner_uid
    return Target(url, secret), "", ""


@router.post("", status_code=201, response_model=SubscriptionOut)
def create_subscription(
    body: SubscriptionIn, store: StoreDep, settings: SettingsDep, principal: Principal
) -> SubscriptionOut:
    policy = TargetPolicy.from_setting(settings.notify_allow_hosts)
    target, app_project, app_uid = _check(body, store, policy)
    subscription = Subscription(
        name=body.name,
        kind=body.kind,
        project=body.project or app_project,  # an app subscription: bound to this app
        app=body.app,
        events=tuple(dict.fromkeys(body.events)),
        app_uid=app_uid,
    )
    project = _project_of(store, subscription)
    require_project(principal, project)
    require_writer(principal, f"subscribe to the events of project {project}")
    saved = _subscriptions(store).put(subscription, target)
    log.info("subscription %s (%s) created by %s", saved.name, saved.kind, principal.name)
    return SubscriptionOut.of(saved)


@router.get("", response_model=list[SubscriptionOut])
def list_subscriptions(store: StoreDep, principal: Principal) -> list[SubscriptionOut]:
    found = _subscriptions(store).all()
    return [SubscriptionOut.of(s) for s in found if can_see(principal, _project_of(store, s))]


def _visible(store: Store, principal: Principal, name: str) -> Subscription:
    subscription = _subscriptions(store).get(name)
    if not can_see(principal, _project_of(store, subscription)):
        raise NotFound(f"no subscription named {name}")
    return subscription


@router.get("/{name}", response_model=SubscriptionOut)
def get_subscription(name: str, store: StoreDep, principal: Principal) -> SubscriptionOut:
    return SubscriptionOut.of(_visible(store, principal, name))


@router.delete("/{name}", status_code=204)
def delete_subscription(name: str, store: StoreDep, principal: Principal) -> Response:
    _visible(store, principal, name)
    require_writer(principal, f"delete subscription {name}")
    _subscriptions(store).delete(name)
    log.info("subscription %s deleted by %s", name, principal.name)
    return Response(status_code=204)


@router.get("/{name}/deliveries", response_model=list[DeliveryOut])
def list_deliveries(
    name: str,
    store: StoreDep,
    principal: Principal,
    limit: int = Query(50, ge=1, le=200),
) -> list[DeliveryOut]:
    _visible(store, principal, name)
    return [DeliveryOut.of(r) for r in Outbox(store.redis, store.keys).results(name, limit)]
