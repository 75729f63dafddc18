"""Operator papercuts: the agent's metrics listener and per-cluster extender URLs."""

from __future__ import annotations

import argparse
import socket

import pytest
from prometheus_client import CollectorRegistry

from cluster_agents.agent import cli as agent_cli
from deploy.local.cli import extender_urls


@pytest.mark.parametrize(
    ("text", "address"),
    [("127.0.0.1:9464", ("127.0.0.1", 9464)), (":0", ("127.0.0.1", 0)), ("off", None)],
)
def test_metrics_address(text: str, address: tuple[str, int] | None) -> None:
    assert agent_cli.metrics_address(text) == address


@pytest.mark.parametrize("text", ["9464", "host:", "host:port", "h:70000", "h:９"])
def test_metrics_address_refuses_garbage(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        agent_cli.metrics_address(text)


def test_metrics_flag_is_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        agent_cli.main(["--help"])
    out = capsys.readouterr().out
    assert "--metrics" in out and "127.0.0.1:9464" in out and "off" in out


async def test_two_agents_on_one_host_pick_free_ports() -> None:
    first, port1 = await agent_cli._metrics_server(CollectorRegistry(), "127.0.0.1", 0)
    second, port2 = await agent_cli._metrics_server(CollectorRegistry(), "127.0.0.1", 0)
    try:
        assert port1 != port2 and port1 > 0 and port2 > 0
    finally:
        await first.cleanup()
        await second.cleanup()


async def test_a_taken_metrics_port_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit, match="--metrics"):
            await agent_cli._metrics_server(CollectorRegistry(), "127.0.0.1", port)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], None),
        (["http://ext:8888"], "http://ext:8888"),
        (["http://{cluster}-ext:8888"], "http://{cluster}-ext:8888"),
        (
            ["dc-a=http://a:1", "dc-b=http://b:2"],
            {"dc-a": "http://a:1", "dc-b": "http://b:2"},
        ),
        (["dc-a=http://a:1?x=y"], {"dc-a": "http://a:1?x=y"}),
    ],
)
def test_extender_urls_one_for_all_or_one_per_cluster(values: list[str], expected: object) -> None:
    assert extender_urls(values) == expected


@pytest.mark.parametrize(
    "values",
    [["http://a:1", "http://b:2"], ["dc-a=http://a:1", "http://b:2"], ["a=x", "a=y"]],
)
def test_extender_urls_refuse_ambiguity(values: list[str]) -> None:
    with pytest.raises(ValueError):
        extender_urls(values)
