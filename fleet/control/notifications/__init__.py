"""Notifications: subscriptions to an app's or a project's events, delivered to generic
webhooks (JSON, HMAC-SHA256 signed) and Slack-compatible incoming webhooks.

- `events`: the event names and which transitions a status write is (pure);
- `subscriptions`: the records, their encrypted URL and secret;
- `targets`: the URL rules against server-side request forgery (GITFLEET_NOTIFY_ALLOW_HOSTS);
- `outbox`: dedup (one message per transition) and the delivery queue; `notify` for events
  detected elsewhere (rollout steps), `observe` for a worker's status write;
- `delivery`: the coordinator's pump that posts, retries with backoff and records results.
"""

from fleet.control.notifications.events import EVENTS
from fleet.control.notifications.outbox import notify, observe

__all__ = ["EVENTS", "notify", "observe"]
