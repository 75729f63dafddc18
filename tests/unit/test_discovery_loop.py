"""The discovery round and loop with an injected tool runner and an in-memory node."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from cluster_agents.discovery import (
    DiscoveredDevice,
    DiscoveryLoop,
    ToolFailed,
    ToolMissing,
    discover,
)
from cluster_agents.discovery.tools import npu_smi
from federation.catalog import Catalog, load_catalog
from federation.catalog import labels as L

DATA = Path(__file__).parent / "data" / "discovery"
NPU = ("npu-smi", "info")


class FakeTools:
    """Answers commands from a table: output text, or an exception to raise; else missing."""

    def __init__(self, answers: dict[tuple[str, ...], str | Exception]) -> None:
        self.answers = answers
        self.calls: list[tuple[tuple[str, ...], float]] = []

    async def __call__(self, argv: Sequence[str], time_limit: float) -> str:
        self.calls.append((tuple(argv), time_limit))
        answer = self.answers.get(tuple(argv), ToolMissing(argv[0]))
        if isinstance(answer, Exception):
            raise answer
        return answer


class FakeNode:
    """A node's labels in memory, counting patches."""

    def __init__(self, labels: Mapping[str, str] | None = None) -> None:
        self.labels = dict(labels or {"kubernetes.io/hostname": "n1"})
        self.patches: list[dict[str, str | None]] = []
        self.reads = 0

    async def read(self) -> Mapping[str, str]:
        self.reads += 1
        return dict(self.labels)

    async def patch(self, labels: Mapping[str, str | None]) -> None:
        self.patches.append(dict(labels))
        for key, value in labels.items():
            if value is None:
                self.labels.pop(key, None)
            else:
                self.labels[key] = value


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def npu_output(name: str = "npu-smi-910b3.txt") -> str:
    return (DATA / name).read_text()


async def test_discover_runs_present_tools_with_the_time_limit() -> None:
    tools = FakeTools({NPU: npu_output()})
    devices = await discover(tools, time_limit=7.5)
    assert len(devices) == 8
    assert (NPU, 7.5) in tools.calls
    assert len(tools.calls) >= 9  # every vendor tool was tried


async def test_discover_reports_a_failing_tool() -> None:
    with pytest.raises(ToolFailed, match="exit status 2"):
        await discover(FakeTools({NPU: ToolFailed("npu-smi info: exit status 2: dcmi error")}))


async def test_first_round_labels_node_then_only_changes_are_patched(catalog: Catalog) -> None:
    tools, node = FakeTools({NPU: npu_output()}), FakeNode()
    loop = DiscoveryLoop(catalog, tools, node.read, node.patch)
    assert await loop.run_once() is True
    assert node.labels[L.MODEL] == "Ascend910B3"
    assert node.labels[L.COUNT] == "7"
    assert node.labels["kubernetes.io/hostname"] == "n1"
    assert await loop.run_once() is False  # nothing changed: no patch
    assert len(node.patches) == 1 and node.reads == 1
    tools.answers[NPU] = npu_output().replace("| Alarm ", "| OK    ")  # NPU 5 recovered
    assert await loop.run_once() is True
    assert node.patches[-1] == {L.COUNT: "8"}


async def test_labels_already_on_the_node_are_not_patched_again(catalog: Catalog) -> None:
    tools = FakeTools({NPU: npu_output()})
    first = FakeNode()
    await DiscoveryLoop(catalog, tools, first.read, first.patch).run_once()
    restarted = FakeNode(first.labels)  # the DaemonSet pod restarts
    assert await DiscoveryLoop(catalog, tools, restarted.read, restarted.patch).run_once() is False
    assert restarted.patches == []


async def test_tool_failure_leaves_labels_unchanged(catalog: Catalog) -> None:
    tools, node = FakeTools({NPU: npu_output()}), FakeNode()
    loop = DiscoveryLoop(catalog, tools, node.read, node.patch)
    await loop.run_once()
    before = dict(node.labels)
    tools.answers[NPU] = ToolFailed("npu-smi: no answer within 30s")
    assert await loop.run_once() is False
    assert node.labels == before
    assert len(node.patches) == 1


async def test_unreadable_output_is_a_failure_not_zero_devices() -> None:
    def broken(outputs: Sequence[str]) -> list[DiscoveredDevice]:
        raise ValueError("column missing")

    probe = replace(npu_smi.PROBE, parse=broken)
    with pytest.raises(ToolFailed, match="npu-smi: unreadable output"):
        await discover(FakeTools({NPU: npu_output()}), [probe])


async def test_devices_gone_removes_labels(catalog: Catalog) -> None:
    tools, node = FakeTools({NPU: npu_output()}), FakeNode()
    loop = DiscoveryLoop(catalog, tools, node.read, node.patch)
    await loop.run_once()
    del tools.answers[NPU]  # driver and tool uninstalled
    assert await loop.run_once() is True
    assert not any(key.startswith(L.PREFIX) for key in node.labels)
    assert node.labels == {"kubernetes.io/hostname": "n1"}


async def test_run_forever_survives_api_errors_and_stops(catalog: Catalog) -> None:
    tools, node = FakeTools({NPU: npu_output()}), FakeNode()
    calls = 0

    async def flaky_patch(labels: Mapping[str, str | None]) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("API server unreachable")
        await node.patch(labels)
        stop.set()

    stop = asyncio.Event()
    loop = DiscoveryLoop(catalog, tools, node.read, flaky_patch)
    await asyncio.wait_for(loop.run_forever(0.01, stop), 5)
    assert calls == 2
    assert node.reads == 2  # labels read afresh after the failed round
    assert node.labels[L.MODEL] == "Ascend910B3"
