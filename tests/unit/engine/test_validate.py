"""What the API server accepts in a dry-run but refuses on the write (`validate.dry_run_gap`)."""

from __future__ import annotations

from typing import Any

from fleet.engine.validate import dry_run_gap
from fleet.model import ObjectRef

EDGE = ObjectRef("", "v1", "Service", "shop", "edge")


def service(*node_ports: Any) -> dict[str, Any]:
    ports = [{"port": 80 + i, "nodePort": p} for i, p in enumerate(node_ports)]
    return {"apiVersion": "v1", "kind": "Service", "spec": {"type": "NodePort", "ports": ports}}


def test_a_node_port_that_is_no_port_number_is_refused_naming_the_object_and_field() -> None:
    message = dry_run_gap(EDGE, service(30080, 99999))
    assert message.startswith("Service/shop/edge refused before the write (Invalid): ")
    assert "spec.ports[1].nodePort: Invalid value: 99999" in message


def test_valid_or_absent_node_ports_and_other_kinds_pass() -> None:
    assert dry_run_gap(EDGE, service(30080, 65535)) == ""
    assert dry_run_gap(EDGE, {"spec": {"ports": [{"port": 80}]}}) == ""
    deployment = ObjectRef("apps", "v1", "Deployment", "shop", "edge")
    assert dry_run_gap(deployment, service(99999)) == ""
