"""The `gitfleet` command line: one module per command family, dispatched from `cli.main`."""
