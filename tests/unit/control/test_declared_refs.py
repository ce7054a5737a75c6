"""`declared_refs` reads a stored status's declared objects without validating the whole
record, and must answer exactly what the validated record says (`ResourceRecord.declared`)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fleet.control.registry.syncrecords import (
    STATUS,
    InstanceStatus,
    ResourceRecord,
    declared_refs,
)
from fleet.model import Action, Health, ObjectRef, SyncStatus


def _validated(raw: bytes) -> set[ObjectRef]:
    return {r.ref for r in STATUS.validate_json(raw).resources if r.declared and r.kind}


def test_every_action_and_default_reads_as_the_validated_record_says() -> None:
    resources = tuple(
        ResourceRecord(
            group="apps" if i % 2 else "",
            version="v1",
            kind="Deployment" if i % 2 else "ConfigMap",
            namespace="" if i == 3 else "team-a",
            name=f"obj-{i}",
            action=action,
            health=Health.HEALTHY,
        )
        for i, action in enumerate(Action)
    )
    nameless_kind = ResourceRecord(version="v1", kind="", name="x", action=Action.CREATED)
    status = InstanceStatus(
        sync_status=SyncStatus.SYNCED, resources=(*resources, nameless_kind), revision="abc"
    )
    raw = STATUS.dump_json(status)

    found = declared_refs(raw)
    assert found == _validated(raw)
    assert {r.name for r in found} == {"obj-0", "obj-1", "obj-2", "obj-4"}  # not pruned, failed
    assert ObjectRef("", "v1", "ConfigMap", "team-a", "obj-0") in found


def test_a_status_without_resources_declares_nothing() -> None:
    assert declared_refs(b"{}") == set() == _validated(b"{}")
    assert declared_refs(STATUS.dump_json(InstanceStatus())) == set()


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[]",
        b'{"resources": [{"kind": "ConfigMap"}]}',
        b'{"resources": 3}',
        b'{"resources": null}',
        b'{"resources": [{"version": "v1", "kind": "ConfigMap", "name": "a", "action": "Moved"}]}',
        b'{"resources": [{"version": "v1", "kind": "ConfigMap", "name": 5, "action": "created"}]}',
        b'{"resources": [{"version": "v1", "kind": "ConfigMap", "name": "a", "group": null,'
        b' "action": "created"}]}',
    ],
)
def test_a_damaged_status_fails_as_a_full_read_would(raw: bytes) -> None:
    with pytest.raises(ValidationError):
        declared_refs(raw)
