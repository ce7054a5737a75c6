"""YAML snippets for sync tests, written as text the way users keep them in git."""

from __future__ import annotations


def configmap(name: str, data: str = "k: v", *, extra_meta: str = "") -> str:
    return f"""apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
{extra_meta}data:
  {data}
"""


def deployment(
    name: str, *, replicas: int = 1, configmap: str = "", wave: int | None = None
) -> str:
    annotations = (
        f'  annotations:\n    gitfleet.io/sync-wave: "{wave}"\n' if wave is not None else ""
    )
    volumes = ""
    if configmap:
        volumes = f"""      volumes:
        - name: config
          configMap:
            name: {configmap}
"""
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
{annotations}spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
        - name: app
          image: example.com/{name}:1
{volumes}"""


def widget_crd(group: str) -> str:
    return f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget}}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {{status: {{}}}}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"""


def widget(group: str, name: str, *, wave: int | None = None) -> str:
    annotations = (
        f'  annotations:\n    gitfleet.io/sync-wave: "{wave}"\n' if wave is not None else ""
    )
    return f"""apiVersion: {group}/v1
kind: Widget
metadata:
  name: {name}
{annotations}spec:
  size: 1
"""
