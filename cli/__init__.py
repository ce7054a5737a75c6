"""The `gitfleet` command line: one module per command family, dispatched from `cli.main`, and
the two they share: `options` (the coordinator connection, labels, durations) and `output`
(tables, JSON, progress)."""
