"""`suanpan apply`, `get services`, `get endpoints`, `describe service` and `delete service`
against the real hub."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from api import cli
from api.service_cli import ENDPOINT_HEADER, SERVICE_HEADER, SHARD_HEADER
from tests.integration.conftest import Hub, service_manifest, service_shard

pytestmark = pytest.mark.integration


async def _suanpan(*argv: str) -> int:
    return await asyncio.to_thread(cli.main, list(argv))


@pytest.fixture
async def member(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> str:
    """A member token of tenant acme, the CLI's token."""
    token = await hub.tenant_with_queue("acme")
    monkeypatch.setenv("SUANPAN_HUB", str(hub.client.make_url("")).rstrip("/"))
    monkeypatch.setenv("SUANPAN_TOKEN", token)
    return token


async def test_apply_creates_then_updates_a_service(
    hub: Hub, member: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = service_manifest()
    path = tmp_path / "service.yaml"
    path.write_text(yaml.safe_dump(manifest))
    assert await _suanpan("apply", "-f", str(path), "--idempotency-key", "k1") == 0
    assert capsys.readouterr().out.startswith("service chat created (")
    manifest["spec"]["server"]["image"] = "vllm/vllm-openai:v0.7.0"
    path.write_text(yaml.safe_dump(manifest))
    assert await _suanpan("apply", "-f", str(path)) == 0
    assert capsys.readouterr().out == "service chat configured (generation 2)\n"
    assert await _suanpan("get", "services") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == SERVICE_HEADER
    assert lines[1].split() == ["chat", "acme", "default", "normal", "2", "2", "Active"]


async def test_apply_refuses_what_is_no_service(
    member: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: suanpan.io/v1\nkind: Job\nmetadata: {name: j}\n")
    with pytest.raises(SystemExit, match="kind Service"):
        await _suanpan("apply", "-f", str(path))
    bad = service_manifest()
    bad["spec"]["spread"] = {"clusters": 0}
    path.write_text(yaml.safe_dump(bad))
    assert await _suanpan("apply", "-f", str(path)) == 1
    assert "spec.spread.clusters" in capsys.readouterr().err


async def test_endpoints_describe_and_delete(
    hub: Hub, member: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, made = await hub.call("POST", "/v1/services", member, json=service_manifest())
    await service_shard(hub, made["id"], 0, "c1", held=2, cap=3, serving=True)
    await service_shard(hub, made["id"], 1, "c2", held=0, cap=1, serving=False)
    assert await _suanpan("get", "endpoints", "chat") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ENDPOINT_HEADER
    assert lines[1].split() == [
        "chat-0",
        "c1",
        "eu-c1",
        "chat.acme.svc.cluster.local",
        "10.96.0.10",
        "http:8000/TCP",
        "2",
        "(2",
        "updated)",
    ]
    assert len(lines) == 2  # chat-1 has not reported
    assert await _suanpan("describe", "service", "chat") == 0
    out = capsys.readouterr().out
    assert "desired: 2" in out
    assert (
        "autoscaling: vllm:num_requests_running average 3.00 over 2 replicas, target 4,"
        " replicas 1-8"
    ) in out
    shards = out[out.index("shards:") : out.index("events:")].splitlines()[1:]
    assert shards[0].split() == SHARD_HEADER
    assert shards[1].split() == ["chat-0", "c1", "Placed", "2", "3", "2", "2", "1"]
    assert shards[2].split() == ["chat-1", "c2", "Placed", "0", "1", "0", "0", "1"]
    assert "Created" in out[out.index("events:") :]
    assert await _suanpan("delete", "service", "chat") == 0
    assert capsys.readouterr().out == "service chat Deleted\n"
    assert await _suanpan("get", "services", "-o", "json") == 0
    assert '"items": []' in capsys.readouterr().out
    assert await _suanpan("get", "endpoints", "chat") == 1
    assert "404" in capsys.readouterr().err
