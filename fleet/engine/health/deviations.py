"""Where gitfleet's health judgement departs from Argo CD's, by Argo CD's own test fixture.

`tests/unit/engine/health/test_argo_fixtures.py` runs one object per fixture of Argo CD's
gitops-engine health tests (`tests/data/health/argo/`) through `gitfleet health` and expects
Argo CD's verdict, except for the fixtures named here. Each entry says what gitfleet answers
instead and why, and, when an application can choose Argo CD's behaviour, the option that does
(then the test checks that the option restores Argo CD's verdict). Every deviation today is
optional. README's "Health" section
lists the same entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet.model import Health


@dataclass(frozen=True)
class Deviation:
    """gitfleet answers `ours` where Argo CD answers otherwise. `argo`: the `HealthOptions`
    values (an app's settings) that give Argo CD's answer; empty when none does."""

    ours: Health
    reason: str
    argo: dict[str, bool] = field(default_factory=dict)


ARGO_DEVIATIONS: dict[str, Deviation] = {
    "ingress-unassigned": Deviation(
        Health.HEALTHY,
        "An Ingress without an address is Healthy by default, its message saying it has no "
        "address yet: many ingress controllers never publish one (argo-cd#14607, #28345), and "
        "Progressing would hold every later wave until the timeout. An app whose controller "
        "publishes addresses sets syncPolicy.ingressNeedsAddress (gitfleet sync and gitfleet "
        "health: --ingress-needs-address) and gets Argo CD's Progressing.",
        argo={"ingress_needs_address": True},
    ),
    "knative-service": Deviation(
        Health.HEALTHY,
        "Argo CD has no check for custom resources without a Lua script and gives them no "
        "health; gitfleet judges every custom resource by kstatus's conditions (Ready, "
        "Available, Succeeded, Reconciling, Stalled), so this Service with Ready=True is "
        "Healthy (judged), and one with Ready=False would be Degraded where Argo CD shows "
        "nothing (argo-cd#15723). Either way it holds no wave. An app that wants Argo CD's "
        "behaviour sets syncPolicy.customResourceHealth: false (gitfleet sync and gitfleet "
        "health: --no-custom-resource-health): its custom resources have no health signal.",
        argo={"custom_resource_health": False},
    ),
}
