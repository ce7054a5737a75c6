"""The `gitfleet` command line: one module per command family, dispatched from `cli.main`, and
the two they share: `options` (the coordinator connection, labels, durations) and `output`
(tables, JSON, progress).

The top layer: it may import every other package (`fleet`, `api`, `worker`, `deploy`,
`loadtest`), and nothing imports it.
"""
