"""`fleet.telemetry` and the processes' span exporters."""
