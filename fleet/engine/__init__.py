"""One sync of one application to one cluster, stage by stage.

`sync.run` is the orchestrator: source (`source/`), render (`render/`), plan (`plan/`: prepare,
tracking, references, order), diff (`diff/`), apply and waves, health (`health/`), prune, then
the in-cluster inventory. `contract` holds what a sync is asked and what it reports.

The engine may import `fleet.kube` and the shared modules (`fleet.errors`, `fleet.model`,
`fleet.telemetry`); never redis, rq, fastapi or `fleet.control`: the CLI runs it with no Redis.
"""
