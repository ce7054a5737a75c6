"""Plain manifests rendered from the Helm chart (`deploy/chart`), for `kubectl apply -f`.

`python -m deploy.manifests render` (or `make manifests`) writes one file per variant below;
`tests/integration/deploy/test_chart.py` renders them again and fails when the checked-in files
differ, so the chart and the manifests never drift apart.

`helm template` cannot read the cluster, so it cannot keep a generated secret across upgrades
(the chart reads its Secret back with `lookup`). The manifests therefore take every secret from
a Secret the user creates first, `gitfleet-secrets` in the namespace `gitfleet` (README,
"Production").
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from fleet.errors import UsageError

CHART = Path(__file__).resolve().parents[1] / "chart"
HERE = Path(__file__).resolve().parent
RELEASE = "gitfleet"
NAMESPACE = "gitfleet"
SECRET = "gitfleet-secrets"
COMPONENT = "app.kubernetes.io/component"


@dataclass(frozen=True)
class Variant:
    """One rendered file: its name and the values files it adds to the chart's defaults."""

    filename: str
    values: tuple[str, ...] = ()


VARIANTS = (Variant("install.yaml"), Variant("install-ha.yaml", ("values-ha.yaml",)))


def header(variant: Variant) -> str:
    values = " ".join(f"-f deploy/chart/{v}" for v in variant.values)
    return (
        f"# Generated from deploy/chart by `make manifests` (helm template {RELEASE} deploy/chart "
        f"-n {NAMESPACE} {values}".rstrip()
        + f" --set secrets.existingSecret={SECRET}); do not edit.\n"
        f"# Create the namespace `{NAMESPACE}` and the Secret `{SECRET}` (keys secret-key, "
        'admin-token, webhook-secret, redis-password) first: README, "Production".\n'
    )


def render(helm: Path, variant: Variant) -> str:
    """The manifests of one variant, as `helm template` writes them, under a header."""
    command = [str(helm), "template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for values in variant.values:
        command += ["--values", str(CHART / values)]
    command += ["--set", f"secrets.existingSecret={SECRET}"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UsageError(f"helm template of {variant.filename} failed: {done.stderr.strip()}")
    return header(variant) + done.stdout


def render_all(helm: Path) -> dict[str, str]:
    """{file name: content} of every variant."""
    return {variant.filename: render(helm, variant) for variant in VARIANTS}


def write_all(helm: Path, folder: Path = HERE) -> list[Path]:
    written = []
    for name, text in render_all(helm).items():
        path = folder / name
        path.write_text(text)
        written.append(path)
    return written


def literal_env(component: str, filename: str = "install.yaml") -> dict[str, str]:
    """The environment variables with literal values (no Secret references) that the checked-in
    manifests give the container of `component` (`api` or `worker`): what a test running the
    image outside Kubernetes adds to the secrets it makes up itself."""
    for doc in yaml.safe_load_all((HERE / filename).read_text()):
        labels = (doc or {}).get("metadata", {}).get("labels", {})
        if doc and doc["kind"] == "Deployment" and labels.get(COMPONENT) == component:
            container = doc["spec"]["template"]["spec"]["containers"][0]
            return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    raise UsageError(f"{filename} has no Deployment of the component {component!r}")
