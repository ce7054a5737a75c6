"""Scaled reconcile benchmarks that report figures (never assertions on time)."""
