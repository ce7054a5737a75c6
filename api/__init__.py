"""The FastAPI coordinator: the REST API, push webhooks and /metrics over the registry.

- `app`: `create_app(settings)`; its lifespan opens the Redis pool, the store and the
  dispatcher, and runs the scheduler (`fleet.control.scheduler`) when asked to.
- `routes/`: one router per resource; `deps`: the shared `Annotated` dependencies.
- `schemas`, `appschemas`: request and response bodies; `views`: what GET returns for an app.
- `auth` (tokens and roles), `gate` (token and body size before a body is read), `errors`
  (4xx answers that name the field), `syncs` (asking the workers for syncs), `metrics`,
  `settings`.
- `client`: the coordinator's HTTP client, used by `cli` and `loadtest`.

It may import `fleet` (control, engine, kube and the shared modules), fastapi, redis and rq;
never `worker`, `deploy`, `loadtest` or `cli`. Handlers validate and enqueue; none runs a sync.
"""
