"""The production KubeSchedulerConfiguration is rendered from the catalog and never drifts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cluster_agents.extender import managed_resources, render, scheduler_config
from cluster_agents.extender.cli import main
from tests.unit.extender.builders import CATALOG

DEPLOYED = Path(__file__).resolve().parents[3] / "deploy/scheduler/kube-scheduler-config.yaml"


def test_deployed_file_is_the_generator_output() -> None:
    assert DEPLOYED.read_text() == render(scheduler_config(CATALOG)), (
        "regenerate: suanpan-extender --print-scheduler-config > " + str(DEPLOYED)
    )


def test_every_catalog_resource_is_managed_and_only_amounts_are_ignored() -> None:
    managed = {r["name"]: r["ignoredByScheduler"] for r in managed_resources(CATALOG)}
    assert set(managed) == set(CATALOG.managed_resources())
    assert managed["huawei.com/Ascend910B3"] is False  # counts: kube-scheduler preempts by them
    assert managed["nvidia.com/gpu"] is False
    assert managed["hygon.com/dcunum"] is False  # a share count the node advertises
    assert managed["nvidia.com/gpumem"] is True  # amounts no node advertises
    assert managed["huawei.com/Ascend910B3-memory"] is True


def test_extender_entry_has_the_protocol_fields() -> None:
    config = yaml.safe_load(DEPLOYED.read_text())
    (extender,) = config["extenders"]
    assert config["profiles"] == [{"schedulerName": "suanpan-scheduler"}]
    assert {k: extender[k] for k in ("filterVerb", "prioritizeVerb", "bindVerb")} == {
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "bindVerb": "bind",
    }
    assert extender["nodeCacheCapable"] is True and extender["weight"] > 0
    assert "preemptVerb" not in extender


def test_cli_prints_the_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--print-scheduler-config", "--url", "http://127.0.0.1:9999"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["extenders"][0]["urlPrefix"] == "http://127.0.0.1:9999"
