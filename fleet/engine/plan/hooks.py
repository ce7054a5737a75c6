"""Hook instances: the name each run of a hook gets, and the label that finds its earlier runs.

Argo CD's hooks are often written with `metadata.generateName` (a migration Job run once per
sync). Such a hook gets a new name on every sync run: its `generateName` followed by a token
derived from the sync run's id and the hook's identity (`instance_name`), so every place that
handles one run (the dry-run before the first write, the apply, the wait, the cleanup) sees the
same name, while the next run gets another one.

Every hook instance, named or generated, carries the label `gitfleet.io/hook-id`
(`HOOK_ID_LABEL`) whose value is the hook's identity (`hook_identity`): a digest of the app,
the hook's group and kind, its namespace and its name (or its `generateName` and phases). The
delete policies (BeforeHookCreation, HookSucceeded, HookFailed) find the earlier instances of
the same hook by this label, never by name, since a generated name changes on every run.

Hook instances are never pruned (`is_instance`): they are no app resource, and an instance an
earlier run left (its policy keeps it) stays until the hook's own policy deletes it.

Whether a sync runs its hooks at all is `runs_hooks`: only when it applies something, when a
person asked for it, or when it retries a failed sync (Argo CD runs hooks on every sync
operation, and its automated sync starts one only when the app is out of sync; a periodic check
of an app in sync is no operation).

Everything here is a pure function.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from fleet.engine.plan.order import hook_phases, is_hook
from fleet.model import Manifest, ObjectRef, Trigger

HOOK_ID_LABEL = "gitfleet.io/hook-id"
MAX_NAME = 63  # a Job's name becomes a label value on its pods, so 63, not 253
TOKEN_LENGTH = 8
# The alphabet the API server itself draws generateName suffixes from (no vowels, no 0/1/3).
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

__all__ = [
    "HOOK_ID_LABEL",
    "generate_name",
    "hook_identity",
    "identity_of",
    "instance_name",
    "is_instance",
    "name_instance",
    "runs_hooks",
]


def _meta(obj: Manifest) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def generate_name(obj: Manifest) -> str:
    """The object's `metadata.generateName` when it has no name; else empty."""
    meta = _meta(obj)
    if meta.get("name"):
        return ""
    value = meta.get("generateName")
    return value if isinstance(value, str) else ""


def hook_identity(app: str, obj: Manifest, *, namespace: str = "") -> str:
    """The label value naming one hook of one app across sync runs: a digest of the app, the
    group and kind, the namespace (`namespace` when the object names none) and the name, or
    the generateName and the phases (so a PreSync and a PostSync Job may share a
    generateName, as each hook's name in Argo CD carries its phase). Two runs of the same
    hook share it; two hooks never do."""
    ref = ObjectRef.of(obj)
    prefix = generate_name(obj)
    own = f"generateName={prefix}" if prefix else f"name={ref.name}"
    where = ref.namespace or namespace
    phases = ",".join(hook_phases(obj)) if prefix else ""
    text = "\n".join((app, ref.group, ref.kind, where, own, phases))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def _token(seed: str) -> str:
    digest = int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big")
    chars = []
    for _ in range(TOKEN_LENGTH):
        digest, index = divmod(digest, len(_ALPHABET))
        chars.append(_ALPHABET[index])
    return "".join(chars)


def instance_name(prefix: str, *, identity: str, run_id: str) -> str:
    """The name of one run of a generateName hook: `prefix` (cut so the whole fits in 63
    characters, as the API server cuts it) and a token from the run id and the identity. Same
    run, same name; another run, another name."""
    return prefix[: MAX_NAME - TOKEN_LENGTH] + _token(f"{run_id}\n{identity}")


def name_instance(obj: Manifest, *, app: str, run_id: str, namespace: str = "") -> Manifest:
    """A copy of the hook `obj` (top level, metadata and labels copied) labelled with its
    identity and, when it uses generateName, named for this run."""
    identity = hook_identity(app, obj, namespace=namespace)
    meta = dict(_meta(obj))
    labels = meta.get("labels")
    meta["labels"] = {**(labels if isinstance(labels, Mapping) else {}), HOOK_ID_LABEL: identity}
    prefix = generate_name(obj)
    if prefix:
        meta.pop("generateName", None)
        meta["name"] = instance_name(prefix, identity=identity, run_id=run_id)
    return {**obj, "metadata": meta}


def runs_hooks(trigger: Trigger, *, applies: bool, retry: bool = False) -> bool:
    """Whether a sync runs its hooks: when it applies something, when a person asked for it,
    or when it retries a failed sync (whose hook may be what failed, with everything else
    already applied: as in Argo CD, a retry runs the whole operation again)."""
    return applies or trigger.by_person or retry


def is_instance(live: Manifest) -> bool:
    """Whether a live object is an instance of a hook: it carries the identity label, or a
    hook annotation (an instance written before the label existed)."""
    return bool(identity_of(live)) or is_hook(live)


def identity_of(obj: Manifest) -> str:
    """The identity label a prepared hook (or a live instance) carries; empty when none."""
    labels = _meta(obj).get("labels")
    value = labels.get(HOOK_ID_LABEL) if isinstance(labels, Mapping) else None
    return value if isinstance(value, str) else ""
