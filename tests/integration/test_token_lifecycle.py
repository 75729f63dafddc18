"""API tokens expire and rotate: expired, revoked and overlapped-out tokens are refused with 401."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from api import cli
from federation.store.tables import api_tokens
from tests.integration.conftest import Hub

pytestmark = pytest.mark.integration


async def _issue(hub: Hub, **body: Any) -> dict[str, Any]:
    status, made = await hub.call("POST", "/v1/tokens", json={"role": "viewer", **body})
    assert status == 201, made
    return dict(made)


def _refused(reply: tuple[int, Any], detail: str) -> None:
    status, problem = reply
    assert status == 401, problem
    assert problem["type"].endswith("/unauthorized") and problem["detail"] == detail


async def test_tokens_expire_after_90_days_unless_told(hub: Hub) -> None:
    made = await _issue(hub, name="default-ttl")
    expires = datetime.fromisoformat(made["expiresAt"])
    assert abs(expires - datetime.now(UTC) - timedelta(days=90)) < timedelta(minutes=1)
    short = await _issue(hub, name="short", ttlSeconds=3600)
    assert datetime.fromisoformat(short["expiresAt"]) - datetime.now(UTC) < timedelta(hours=1)
    _, listed = await hub.call("GET", "/v1/tokens")
    by_name = {t["name"]: t for t in listed["items"]}
    assert by_name["bootstrap-admin"]["expiresAt"] is None  # the operator's own, never expires
    assert by_name["short"]["expiresAt"] == short["expiresAt"]


@pytest.mark.parametrize("ttl", [0, 59, 3650 * 86400 + 1, "1h", None])
async def test_a_bad_ttl_is_refused_and_issues_nothing(hub: Hub, ttl: Any) -> None:
    status, problem = await hub.call(
        "POST", "/v1/tokens", json={"name": "bad", "role": "viewer", "ttlSeconds": ttl}
    )
    assert status == 422 and problem["errors"][0]["path"] == "ttlSeconds", problem
    _, listed = await hub.call("GET", "/v1/tokens")
    assert "bad" not in {t["name"] for t in listed["items"]}


async def test_an_expired_token_is_refused(hub: Hub) -> None:
    made = await _issue(hub, name="old")
    async with hub.db.transaction() as conn:
        await conn.execute(
            sa.update(api_tokens)
            .where(api_tokens.c.id == uuid.UUID(made["id"]))
            .values(expires_at=sa.func.now() - timedelta(seconds=1))
        )
    _refused(await hub.call("GET", "/v1/whoami", token=made["token"]), "token expired")


async def test_rotation_keeps_the_old_token_until_it_is_revoked(hub: Hub) -> None:
    member = await hub.tenant_with_queue("acme")
    _, listed = await hub.call("GET", "/v1/tokens")
    (old,) = [t for t in listed["items"] if t["name"] == "acme-member"]
    status, new = await hub.call("POST", f"/v1/tokens/{old['id']}/rotate", json={})
    assert status == 201 and new["rotatedFrom"] == old["id"] and new["name"] == "acme-member"
    for token in (member, new["token"]):
        assert await hub.call("GET", "/v1/whoami", token=token) == (
            200,
            {"role": "member", "tenant": "acme", "subject": None},
        )
    assert (await hub.call("DELETE", f"/v1/tokens/{old['id']}"))[0] == 204
    _refused(await hub.call("GET", "/v1/whoami", token=member), "unknown or revoked token")
    assert (await hub.call("GET", "/v1/queues", token=new["token"]))[0] == 200
    status, problem = await hub.call("POST", f"/v1/tokens/{old['id']}/rotate", json={})
    assert status == 409, problem


async def test_an_overlap_ends_the_old_token_even_while_it_is_cached(hub: Hub) -> None:
    old = await _issue(hub, name="ci")
    status, new = await hub.call(
        "POST", f"/v1/tokens/{old['id']}/rotate", json={"overlapSeconds": 1, "ttlSeconds": 600}
    )
    assert status == 201
    assert datetime.fromisoformat(new["expiresAt"]) - datetime.now(UTC) < timedelta(minutes=10)
    assert (await hub.call("GET", "/v1/whoami", token=old["token"]))[0] == 200  # now cached
    await asyncio.sleep(1.5)  # past the overlap, within the cache's lifetime
    _refused(await hub.call("GET", "/v1/whoami", token=old["token"]), "token expired")
    assert (await hub.call("GET", "/v1/whoami", token=new["token"]))[0] == 200


@pytest.mark.parametrize(
    ("body", "path"),
    [({"overlapSeconds": -1}, "overlapSeconds"), ({"ttlSeconds": 10}, "ttlSeconds")],
)
async def test_a_bad_rotation_is_refused_and_changes_nothing(
    hub: Hub, body: dict[str, int], path: str
) -> None:
    old = await _issue(hub, name="keep")
    status, problem = await hub.call("POST", f"/v1/tokens/{old['id']}/rotate", json=body)
    assert status == 422 and problem["errors"][0]["path"] == path, problem
    _, listed = await hub.call("GET", "/v1/tokens")
    assert [t["name"] for t in listed["items"]].count("keep") == 1
    status, _ = await hub.call("POST", f"/v1/tokens/{uuid.uuid4()}/rotate", json={})
    assert status == 404


async def test_the_cli_creates_and_rotates_tokens(
    hub: Hub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = str(hub.client.make_url("")).rstrip("/")
    monkeypatch.setenv("SUANPAN_HUB", url)
    monkeypatch.setenv("SUANPAN_TOKEN", "sp_test_admin_token")
    argv = ["token", "create", "nightly", "--role", "viewer", "--ttl", "12h", "-o", "json"]
    assert await asyncio.to_thread(cli.main, argv) == 0
    made = json.loads(capsys.readouterr().out)
    left = datetime.fromisoformat(made["expiresAt"]) - datetime.now(UTC)
    assert timedelta(hours=11) < left <= timedelta(hours=12)
    argv = ["token", "rotate", made["id"], "--overlap", "0", "-o", "json"]
    assert await asyncio.to_thread(cli.main, argv) == 0
    rotated = json.loads(capsys.readouterr().out)
    assert rotated["rotatedFrom"] == made["id"]
    left = datetime.fromisoformat(rotated["expiresAt"]) - datetime.now(UTC)
    assert timedelta(hours=11) < left <= timedelta(hours=12)  # the old token's lifetime
    _refused(await hub.call("GET", "/v1/whoami", token=made["token"]), "token expired")
    assert (await hub.call("GET", "/v1/whoami", token=rotated["token"]))[0] == 200
    assert await asyncio.to_thread(cli.main, ["token", "list"]) == 0
    assert "nightly" in capsys.readouterr().out
