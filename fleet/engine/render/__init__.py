"""Stage 2, render: the files at an application's path turned into Kubernetes objects.

- `cache`: the entry point (`Renderer`): picks the renderer, runs it, and caches the result
  keyed by the path's tree id and every other input the render reads.
- `plain`, `kustomize`, `helm`: one module per renderer, each saying which inputs it reads.
- `job`: one render job (`RenderParams`, `RenderJob`), the repository path helpers, and writing
  the job's inputs into the folder a tool runs in.
- `manifests`: YAML and JSON parsing and object validation, where every renderer's text ends.
- `tools`: finding and running the external programs (kubectl for kustomize, helm) as
  bounded children without the worker's secrets; `launch` is the first code such a child runs.
"""
