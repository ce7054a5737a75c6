"""gitfleet: a GitOps control plane for fleets of Kubernetes clusters.

`fleet` is the library: one module per sync stage (source, render, order, diff, apply, health,
prune) beside the shared model, errors, the Kubernetes edge (`kube`) and telemetry.
"""
