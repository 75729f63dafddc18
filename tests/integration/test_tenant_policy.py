"""A tenant's policy: host paths, host network and privileged containers are refused at
submission with a 422 naming each field, unless an administrator allows them for the tenant."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Hub, job_manifest

pytestmark = pytest.mark.integration

AT = "spec.tasks[0].template.spec"


def _node_hungry(privileged: bool = True, host_network: bool = True) -> dict[str, Any]:
    container = {"name": "w", "image": "x", "securityContext": {"privileged": privileged}}
    template = {
        "spec": {
            "hostNetwork": host_network,
            "containers": [container],
            "volumes": [{"name": "logs", "hostPath": {"path": "/var/log"}}],
        }
    }
    return job_manifest(tasks=[{"name": "w", "template": template}])


async def test_the_default_policy_refuses_each_node_field_by_path(hub: Hub) -> None:
    token = await hub.tenant_with_queue("acme")
    status, problem = await hub.call("POST", "/v1/jobs", token, json=_node_hungry())
    assert status == 422, problem
    assert sorted(e["path"] for e in problem["errors"]) == [
        f"{AT}.containers[0].securityContext.privileged",
        f"{AT}.hostNetwork",
        f"{AT}.volumes[0].hostPath",
    ]
    status, listed = await hub.call("GET", "/v1/jobs", token)
    assert status == 200 and listed["items"] == []


async def test_an_administrator_allows_per_tenant(hub: Hub) -> None:
    acme = await hub.tenant_with_queue("acme")
    other = await hub.tenant_with_queue("other")
    allow = {"allowHostPath": True, "allowHostNetwork": True}
    status, _ = await hub.call("PUT", "/v1/tenants/acme/policy", acme, json=allow)
    assert status == 403  # members do not set their own policy
    status, policy = await hub.call("PUT", "/v1/tenants/acme/policy", json=allow)
    assert status == 200 and policy == {**allow, "allowPrivileged": False}
    status, seen = await hub.call("GET", "/v1/tenants/acme/policy", acme)
    assert status == 200 and seen == policy
    status, _ = await hub.call("GET", "/v1/tenants/acme/policy", other)
    assert status == 404
    status, body = await hub.call("POST", "/v1/jobs", acme, json=_node_hungry(privileged=False))
    assert status == 201, body
    status, problem = await hub.call("POST", "/v1/jobs", acme, json=_node_hungry())
    assert status == 422
    assert [e["path"] for e in problem["errors"]] == [
        f"{AT}.containers[0].securityContext.privileged"
    ]
    status, _ = await hub.call("POST", "/v1/jobs", other, json=_node_hungry(privileged=False))
    assert status == 422


async def test_a_bad_policy_is_refused(hub: Hub) -> None:
    await hub.tenant_with_queue("acme")
    status, problem = await hub.call("PUT", "/v1/tenants/acme/policy", json={"allowAll": True})
    assert status == 422 and problem["errors"][0]["path"] == "allowAll"
    status, _ = await hub.call("PUT", "/v1/tenants/nope/policy", json={})
    assert status == 404
