"""Stage 2, render: the files at an application's path turned into Kubernetes objects.

- `stage`: plain YAML, kustomize and helm, and the render cache keyed by the path's tree id.
- `tools`: where the external programs (kubectl for kustomize, helm) are found.
"""
