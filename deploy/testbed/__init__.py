"""A local multi-cluster Kubernetes testbed built from pinned Go modules.

Every test, the demo and the benchmarks run against real control planes: etcd (shared, one key
prefix per cluster), kube-apiserver, kube-controller-manager, kube-scheduler and kwok (fake nodes
that run pods) per cluster, all on 127.0.0.1. `build` compiles the binaries once per pin set;
`runner` starts and stops clusters and records their pids; `process` starts, watches and
stops each child (and `wait_for`, the one polling helper); `pki` and `kubeconfig` make a
cluster's key material and kubeconfig; `api` makes the few HTTPS calls that bring a cluster
up (fake nodes, readiness checks); `errors` says what to do when a step fails.
"""
