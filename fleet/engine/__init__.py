"""One sync of one application to one cluster, stage by stage.

`sync.run` is the orchestrator: source (`source/`), render (`render/`), plan (`plan/`: prepare,
tracking, references, order), diff (`diff/`, and its cluster half in `apply`), apply and waves
with health gates (`health/`), prune, then the in-cluster inventory (`inventory`); `scope`
checks each write and delete against the project's boundaries as it happens. Stages return
a `StageReport` (`report`) and `sync` folds them into the `SyncResult`; `contract` holds what a
sync is asked and what it reports, `caches` the git and render caches a sync reuses, `limits`
the bounds on what fetching and rendering a repository may cost.

The engine may import `fleet.kube` and the shared modules (`fleet.errors`, `fleet.model`,
`fleet.telemetry`); never redis, rq, fastapi or `fleet.control`: the CLI runs it with no Redis.
"""
