"""Deployment tooling: the local multi-cluster testbed and manifests to run gitfleet itself."""
