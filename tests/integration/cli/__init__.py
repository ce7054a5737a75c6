"""The `gitfleet` command run against the testbed."""
