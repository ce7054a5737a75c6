"""`fleet.engine` against the testbed: source, render, sync scenarios, prune."""
