"""Scaled reconcile benchmarks that report figures (never assertions on time).

- `bench` (`gitfleet bench`), `presets` (its command line) and `context` (what every phase
  shares); the phases: `baselines`, `phases`, `changes`, `memory`, `scaling`; `engine_bench`,
  the engine's own benchmark.
- `workload`, `fleetrun` (the system under test as processes), `gitserve`, `board` (waiting
  for Synced and Healthy), `probes` (CPU, memory, API requests, spans).
- `report` and `plots`: report.json, report.md and the charts; `extra`: the `bench` extra.

It may import `api` (the HTTP client, the views it reads), `worker`, `deploy` and `fleet`;
only `cli` imports it.
"""
