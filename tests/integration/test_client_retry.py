"""The hub client against a real hub that refuses for now (429 with Retry-After): what is safe
to send again is sent again after the wait the hub gave, and nothing is created twice."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from api.client import HubClient, HubError
from federation.hubconfig import Bucket, HubConfig, RateLimits
from federation.store.database import Database
from federation.store.tables import jobs
from tests.integration.conftest import ADMIN_TOKEN, Hub, job_manifest, serving_hub

pytestmark = pytest.mark.integration


@pytest.fixture
async def hub(db: Database) -> AsyncIterator[Hub]:
    """A hub whose tokens and tenants may send a burst of 3 requests, then one a second."""
    limits = RateLimits(True, Bucket(1.0, 3), Bucket(1.0, 3))
    async with serving_hub(db, HubConfig(rate_limits=limits)) as served:
        yield served


async def test_a_refused_read_and_submission_are_sent_again_after_retry_after(
    hub: Hub,
) -> None:
    url = str(hub.client.make_url("")).rstrip("/")
    async with HubClient(url, ADMIN_TOKEN) as admin:
        for path, body in (
            ("/v1/tenants", {"name": "t"}),
            ("/v1/tenants/t/queues", {"name": "default"}),
            ("/v1/tokens", {"name": "m", "role": "member", "tenant": "t"}),
        ):
            created = await admin.request("POST", path, json=body)
        member = created["token"]
        start = time.monotonic()
        tenants = await admin.request("GET", "/v1/tenants")  # refused once, then served
        assert time.monotonic() - start >= 0.5 and [t["name"] for t in tenants["items"]] == ["t"]
        with pytest.raises(HubError) as refused:  # no key: a creation is not sent twice
            await admin.request("POST", "/v1/tenants", json={"name": "u"})
        assert refused.value.status == 429 and refused.value.retry_after_s == 1
    async with HubClient(url, member) as client:
        ids = [(await client.submit(job_manifest(f"j{i}")))["id"] for i in range(5)]
    assert len(set(ids)) == 5
    async with hub.db.transaction() as conn:
        names = (await conn.execute(sa.select(jobs.c.name))).scalars().all()
    assert sorted(names) == [f"j{i}" for i in range(5)]  # each exactly once
