"""The registry: what the coordinator knows, stored in Redis.

- `records`: clusters, projects, apps and tokens as frozen records.
- `store`: reading and writing them, with credentials encrypted by `secrets`.
- `instances`: an app on one cluster (`app@cluster`), and which clusters an app deploys to.
- `repos`: repository URLs in the normal form that names one repository (webhooks, pushes).
- `gitcreds`: git credentials bound to their URL, and repository credentials for many apps.
- `tokens`: API tokens, kept only as digests.
- `syncrecords`: what a sync leaves: each instance's status and its sync history, typed; and
  the last operation requested through the API, and a preview's answer.
- `status`: storing those records, the last API operation, and the counters /metrics reads.
- `backup`: the whole registry as one versioned JSON document, secrets still encrypted, and its
  restore (`gitfleet registry export|import`).
- `transact`: the generation-guarded transaction every registry write goes through.
- `errors`: what a read or write refuses (`NotFound`, `AlreadyExists`, `InUse`, ...).

The registry never imports `fleet.control.routing`: who syncs what sits above what is stored.
"""
