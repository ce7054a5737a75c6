"""Ask the workers for syncs: one trace per request, the context carried in each job.

The request that causes a sync starts its trace here (`gitfleet.api.<trigger>`), with one
child span per instance enqueued; the W3C trace context is injected into the carrier the
dispatcher puts in the job, so the worker's `gitfleet.sync` span and the engine's stage spans
join this trace. The trace id goes back in the 202 so a caller can look the sync up.

The routes check the sync windows before they call in here (`fleet.control.policy
.blocked_reason`): a manual sync (or rollback) is enqueued only if the windows allow manual syncs
now; a webhook's (an automated trigger) only if they allow automated ones. The scheduler checks
its own triggers, and the worker checks every sync again before it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry import propagate, trace

from api.deps import QueuedJob, SyncRequester
from fleet.control.registry.records import AppRecord
from fleet.control.registry.syncrecords import OperationJob
from fleet.model import Trigger

tracer = trace.get_tracer("gitfleet.api")


@dataclass(frozen=True)
class Enqueued:
    trace_id: str
    refs: list[tuple[str, QueuedJob]]

    def jobs(self) -> tuple[OperationJob, ...]:
        return tuple(
            OperationJob(cluster=c, job_id=r.job_id, queue=r.queue, merged=r.merged)
            for c, r in self.refs
        )


def request_syncs(
    dispatcher: SyncRequester,
    app: AppRecord,
    clusters: list[str],
    *,
    trigger: Trigger,
    revision: str | None = None,
    dry_run: bool = False,
    prune: bool | None = None,
) -> Enqueued:
    """Enqueue a sync of `app` on each of `clusters`, in one trace. `prune`: the caller's
    choice for this sync only (None: the app's syncPolicy.prune)."""
    attributes: dict[str, str | bool | int] = {
        "gitfleet.app": app.name,
        "gitfleet.trigger": trigger,
        "gitfleet.revision": revision or app.source.revision,
        "gitfleet.dry_run": dry_run,
        "gitfleet.clusters": len(clusters),
    }
    if prune is not None:
        attributes["gitfleet.prune"] = prune
    with tracer.start_as_current_span(f"gitfleet.api.{trigger}", attributes=attributes) as span:
        refs = [
            (cluster, _enqueue(dispatcher, app, cluster, trigger, revision, dry_run, prune))
            for cluster in clusters
        ]
        context = span.get_span_context()
    trace_id = format(context.trace_id, "032x") if context.trace_id else ""
    return Enqueued(trace_id, refs)


def _enqueue(
    dispatcher: SyncRequester,
    app: AppRecord,
    cluster: str,
    trigger: Trigger,
    revision: str | None,
    dry_run: bool,
    prune: bool | None,
) -> QueuedJob:
    with tracer.start_as_current_span(
        "gitfleet.api.enqueue", attributes={"gitfleet.cluster": cluster}
    ):
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return dispatcher.request_sync(
            app.name,
            cluster,
            trigger=trigger,
            revision=revision,
            dry_run=dry_run,
            carrier=carrier,
            prune=prune,
        )
