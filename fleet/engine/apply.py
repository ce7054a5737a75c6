"""Server-side apply of out-of-sync objects, validated by a server-side dry-run first.

`Applier.decide` compares each desired object with its live state (`diff.compare`) and, where
the local comparison says something changed, confirms it with a dry-run apply: the dry-run's
answer equal to live means no drift (defaulting explained the difference). The same dry-run is
the validation: `Applier.validate_all` raises one ApplyError naming every object the server
refuses, before anything is written. Objects whose API does not exist yet (a custom resource of
a CRD in the same sync) or whose namespace this sync creates cannot be dry-run and are
validated when applied.

An immutable-field error recreates the object only when it opts in with
`gitfleet.io/sync-options: Replace=true` (or Argo CD's annotation); otherwise the error names
the field and the option. The per-cluster concurrency limit is the client's connection pool.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from fleet.engine.diff import compare as diff
from fleet.engine.plan import tracking
from fleet.errors import ApplyError, FleetError, KubeApiError
from fleet.kube.client import KubeClient
from fleet.model import Action, Manifest, ObjectRef

LIST_THRESHOLD = 4  # objects of one kind in one namespace above which a LIST beats GETs
REPLACE_HINT = "Set gitfleet.io/sync-options: Replace=true to recreate it."


@dataclass
class Decision:
    """What to do with one desired object, filled in stage by stage."""

    ref: ObjectRef
    desired: Manifest
    live: Manifest | None
    drift: diff.Drift
    apply: bool
    dry_run_error: str = ""
    replace: bool = False
    skip_reason: str = ""

    @property
    def action(self) -> Action:
        if self.skip_reason:
            return Action.SKIPPED
        if not self.apply:
            return Action.UNCHANGED
        return Action.CREATED if self.live is None else Action.CONFIGURED


class Applier:
    def __init__(self, kube: KubeClient, *, force: bool = True, workers: int = 8) -> None:
        self.kube = kube
        self.force = force
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="apply")
        self.writes = 0

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    # -- decide and validate ------------------------------------------------------------------

    def fetch_live(
        self, refs: Sequence[ObjectRef], servable: set[ObjectRef]
    ) -> dict[ObjectRef, Manifest | None]:
        """Live state of every ref: one LIST per (kind, namespace) holding several objects,
        a GET for the rest, concurrently. Refs whose kind is not served yet are None."""
        groups: dict[tuple[str, str, str], list[ObjectRef]] = defaultdict(list)
        for ref in refs:
            if ref in servable:
                groups[(ref.api_version, ref.kind, ref.namespace)].append(ref)
        found: dict[ObjectRef, Manifest | None] = dict.fromkeys(refs)
        for part in self.pool.map(self._fetch_group, groups.items()):
            found.update(part)
        return found

    def _fetch_group(
        self, item: tuple[tuple[str, str, str], list[ObjectRef]]
    ) -> dict[ObjectRef, Manifest | None]:
        (api_version, kind, namespace), refs = item
        if len(refs) < LIST_THRESHOLD:
            return {ref: self.kube.get(ref) for ref in refs}
        listed = self.kube.list(api_version, kind, namespace=namespace)
        by_name = {o["metadata"]["name"]: o for o in listed}
        return {ref: by_name.get(ref.name) for ref in refs}

    def decide(
        self,
        desired: Manifest,
        live: Manifest | None,
        *,
        ignore: diff.IgnoreRules,
        can_dry_run: bool,
    ) -> Decision:
        ref = ObjectRef.of(desired)
        drift = diff.compare(desired, live, ignore=ignore)
        decision = Decision(ref, diff.strip_ignored(desired, ignore, live), live, drift, False)
        if drift.in_sync:
            return decision
        decision.apply = True
        if can_dry_run:
            self._confirm(decision)
        return decision

    def _confirm(self, decision: Decision) -> None:
        try:
            answer = self.kube.apply(decision.desired, force=self.force, dry_run=True)
        except KubeApiError as e:
            if _is_immutable(e) and tracking.wants_replace(decision.desired):
                decision.replace = True
            else:
                decision.dry_run_error = _explain(decision.ref, e)
            return
        if decision.live is not None and diff.normalize(answer) == diff.normalize(decision.live):
            decision.apply = False

    def decide_all(
        self, items: Sequence[tuple[Manifest, Manifest | None, bool]], ignore: diff.IgnoreRules
    ) -> list[Decision]:
        return list(
            self.pool.map(lambda i: self.decide(i[0], i[1], ignore=ignore, can_dry_run=i[2]), items)
        )

    @staticmethod
    def validate_all(decisions: Sequence[Decision]) -> None:
        refused = [d.dry_run_error for d in decisions if d.dry_run_error]
        if refused:
            raise ApplyError(
                f"server-side dry-run refused {len(refused)} object(s); nothing was written:\n  "
                + "\n  ".join(refused)
            )

    # -- apply --------------------------------------------------------------------------------

    def apply_one(self, decision: Decision, *, deadline: float) -> Manifest:
        """Apply (or recreate) one object; return the live object the server answered."""
        if decision.replace:
            return self._recreate(decision, deadline=deadline)
        try:
            live = self.kube.apply(decision.desired, force=self.force)
        except KubeApiError as e:
            if _is_immutable(e) and tracking.wants_replace(decision.desired):
                return self._recreate(decision, deadline=deadline)
            raise ApplyError(_explain(decision.ref, e), obj=str(decision.ref)) from e
        self.writes += 1
        return live

    def apply_many(
        self, decisions: Sequence[Decision], *, deadline: float
    ) -> list[tuple[Decision, Manifest | None, FleetError | None]]:
        """Apply concurrently; every outcome is returned, failures included."""

        def run(d: Decision) -> tuple[Decision, Manifest | None, FleetError | None]:
            try:
                return d, self.apply_one(d, deadline=deadline), None
            except FleetError as e:
                return d, None, e

        return list(self.pool.map(run, decisions))

    def _recreate(self, decision: Decision, *, deadline: float) -> Manifest:
        self.kube.delete(decision.ref, propagation="Foreground")
        self.writes += 1
        while self.kube.get(decision.ref) is not None:
            if time.monotonic() > deadline:
                raise ApplyError(f"{decision.ref} replace failed: the old object is not gone")
            time.sleep(0.2)
        live = self.kube.apply(decision.desired, force=self.force)
        self.writes += 1
        return live


def _is_immutable(e: KubeApiError) -> bool:
    return e.status == 422 and "immutable" in str(e).lower()


def _explain(ref: ObjectRef, e: KubeApiError) -> str:
    message = str(e).split(": ", 1)[-1] if ": " in str(e) else str(e)
    text = f"{ref} apply failed ({e.reason or e.status}): {message}"
    if _is_immutable(e):
        text += f" {REPLACE_HINT}"
    return text
