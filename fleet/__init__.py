"""gitfleet's library: one sync of one app (`engine`), the fleet's state (`control`), the edge.

- `fleet.kube`: the cluster edge, the library's only code that speaks HTTP to a Kubernetes API
  server (the testbed's bring-up calls, `deploy.testbed.api`, sit outside the library).
- `fleet.engine`: one sync of one application to one cluster, stage by stage; no Redis, rq or web.
- `fleet.control`: the fleet's state and coordination in Redis; it calls the engine, never the
  reverse.
- Shared by all three: `errors` (typed errors), `model` (object references, statuses) and
  `telemetry` (span helpers on the OpenTelemetry API, and the SDK set-up processes call).

Layers, top to bottom: control, engine, kube, then the shared modules. Nothing imports upward;
the contracts in `pyproject.toml` (`lint-imports`) enforce it.
"""
