"""A sync's status write through a real worker: what follows it (notifications, the commit
clock) is read in the same round trip as the previous status, and a problem there never costs
the sync its record."""

from __future__ import annotations

from fleet.model import Trigger
from tests.support.fleet import FleetEnv


def test_a_broken_notification_key_never_costs_a_sync_its_status_and_history(
    fleet: FleetEnv,
) -> None:
    cluster = sorted(fleet.clusters)[0]
    app = fleet.app_name(0)
    fleet.commit_apps([app])
    fleet.add_app(app, cluster)
    broken = fleet.store.keys.notify(f"last:{app}")
    fleet.redis.set(broken, "a string where a hash belongs")  # HMGET answers WRONGTYPE
    fleet.worker_thread("alpha")
    answer = fleet.sync_and_wait(app, cluster, Trigger.MANUAL)
    assert answer["result"] == "succeeded", answer
    status = fleet.status(app, cluster)
    assert status.sync_status == "Synced" and status.last_sync is not None
    assert [entry.trace_id for entry in fleet.store.history(app, cluster)] == [answer["trace_id"]]
