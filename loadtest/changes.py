"""Phase 5: a monorepo change, one commit touching one app of N, delivered by the push webhook.

Each round waits until the fleet is idle, commits a new `value` into the first ConfigMap of a
random app (seeded), and POSTs a GitHub push event for it (signed with the webhook secret,
listing the touched path as GitHub does). Commit-to-converged is the time from the commit to
the first GET that shows the new value in the cluster (polled every 20 ms). The round then
waits until every app the webhook triggered has synced that commit, and counts the renders
that really ran: new entries in the workers' render caches (one file per render, so a render
done by a quiet check, outside any span, counts too), with the sync records' `rendered` and
the uncached `gitfleet.render` spans of the whole phase as cross-checks.
"""

from __future__ import annotations

import random
import time
from typing import Any

from dulwich.repo import Repo

from fleet.kube.client import KubeClient
from fleet.model import ObjectRef
from loadtest.context import Run, percentile, wait_until
from loadtest.fleetrun import BenchError, push_event
from loadtest.phases import timeout_for
from loadtest.probes import is_uncached_render
from loadtest.workload import App, change, changed_ref

POLL_S = 0.02


def monorepo(run: Run) -> None:
    rng = random.Random(run.params.seed)
    with Repo(str(run.repo)) as repo:
        head = repo.head().decode()
    run.traces.mark()
    rounds = []
    for index in range(run.params.commits):
        run.fleet.wait_idle(timeout=timeout_for(len(run.apps)))
        found = one_change(run, rng.choice(run.apps), value=f"commit-{index + 1}", before=head)
        rounds.append(found)
        head = found["sha"]
    latencies = [r["converged_s"] for r in rounds]
    run.add("commit_to_converged_p50_s", percentile(latencies, 50), "s")
    run.add("commit_to_converged_p95_s", percentile(latencies, 95), "s")
    run.add("commit_to_converged_max_s", max(latencies), "s")
    renders = [r["renders"] for r in rounds]
    unit = "renders per commit (mean; new entries in the workers' render caches)"
    run.add("monorepo_renders", sum(renders) / len(rounds), unit)
    syncs = sum(r["syncs_triggered"] for r in rounds)
    run.add("monorepo_syncs_per_commit", syncs / len(rounds), "syncs the webhook triggered")
    hooks = [r["webhook_s"] for r in rounds]
    run.add("monorepo_webhook_response_p50_s", percentile(hooks, 50), "s")
    drains = [r["all_synced_s"] for r in rounds]
    run.add("monorepo_all_synced_p50_s", percentile(drains, 50), "s from commit")
    run.traces.settle()
    run.details["monorepo"] = {
        "latencies_s": [round(x, 3) for x in latencies],
        "renders": renders,
        "render_spans_uncached": run.traces.count("gitfleet.render", is_uncached_render),
        "rounds": rounds,
    }


def one_change(run: Run, app: App, *, value: str, before: str) -> dict[str, Any]:
    """Commit, push, time until the new value is live, then until every triggered app synced
    the commit; what the sync records say about it."""
    kube, ref = run.clients[app.cluster], changed_ref(app, run.namespace)
    renders_before = run.fleet.render_cache_entries()
    sha, paths = change(run.repo, app, run.params.objects_per_app, value)
    committed = time.time()
    event = push_event(run.repo_url(), sha=sha, before=before, paths=paths)
    answer = run.api.push(run.fleet.env["GITFLEET_WEBHOOK_SECRET"], event)
    answered = time.time()
    converged = wait_until(
        lambda: live_value(kube, ref) == value,
        timeout=timeout_for(len(run.apps)),
        what=f"{ref} to show value {value}",
        period=POLL_S,
    )
    by_name = {a.name: a for a in run.apps}
    triggered = [by_name[name] for name in answer["triggered"] if name in by_name]
    if app not in triggered:
        raise BenchError(f"the push of {sha} did not trigger {app.name}: {answer}")
    timeout = timeout_for(len(triggered))
    settled = run.board.wait(triggered, since=committed, revision=sha, timeout=timeout)
    own = settled[app.name]
    return {
        "app": app.name,
        "sha": sha,
        "converged_s": round(converged - committed, 4),
        "webhook_s": round(answered - committed, 4),
        "syncs_triggered": len(answer["triggered"]),
        "renders": run.fleet.render_cache_entries() - renders_before,
        "renders_in_sync_records": sum(s.rendered for s in settled.values()),
        "full_syncs": sum(not s.quiet for s in settled.values()),
        "all_synced_s": round(max(s.finished for s in settled.values()) - committed, 3),
        "its_sync_started_s": round(own.started - committed, 4),
        "its_sync_ms": round(1000 * (own.finished - own.started), 1),
    }


def live_value(kube: KubeClient, ref: ObjectRef) -> str:
    found = kube.get(ref)
    return str(((found or {}).get("data") or {}).get("value", ""))
