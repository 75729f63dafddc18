"""The Grafana dashboard and the Prometheus alerting rules in deploy/monitoring: the rules pass
`promtool check rules` and their unit tests (`promtool test rules`), every dashboard query
parses as PromQL, and every metric either one names is exported by a Suanpan component."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

import api.metrics  # noqa: F401 - registers the API's metrics in the hub registry
from cluster_agents.agent.agent import AgentMetrics
from cluster_agents.agent.hub_client import HubApi
from cluster_agents.extender.metrics import Metrics as ExtenderMetrics
from cluster_agents.kube.metrics import BackendMetrics
from federation.metrics import LOOP_REGISTRY, REGISTRY

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
RULES = MONITORING / "alerts.yaml"
DASHBOARD = json.loads((MONITORING / "suanpan-dashboard.json").read_text())
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
}


def _promtool(promtool: Path, *args: str) -> str:
    done = subprocess.run(
        [str(promtool), *args], cwd=MONITORING, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [q for p in panels for q in (p, *_panels(p.get("panels", [])))]


def dashboard_exprs() -> list[str]:
    """Every query of the dashboard, with Grafana's variables set as at a 5-minute range."""
    exprs = [t["expr"] for p in _panels(DASHBOARD["panels"]) for t in p.get("targets", [])]
    values = {"$__rate_interval": "5m", "$cluster": ".*", "$tenant": ".*"}
    variable = re.compile(r"\$(__rate_interval|cluster|tenant)\b")
    return [variable.sub(lambda m: values[m[0]], e) for e in exprs]


def rule_exprs() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


def exported_names() -> set[str]:
    """Every sample name the hub, an agent (with its Kubernetes backend) and an extender export."""
    agent = CollectorRegistry()
    AgentMetrics(agent)
    HubApi("http://hub", "token", agent)
    BackendMetrics(agent)
    registries = [REGISTRY, LOOP_REGISTRY, agent, ExtenderMetrics().registry]
    return {
        family.name + suffix
        for registry in registries
        for family in registry.collect()
        for suffix in SUFFIXES.get(family.type, ("",))
    }


def test_rules_pass_promtool_check(promtool_bin: Path) -> None:
    assert "SUCCESS: 6 rules found" in _promtool(promtool_bin, "check", "rules", RULES.name)


def test_rules_pass_their_promtool_unit_tests(promtool_bin: Path) -> None:
    assert "SUCCESS" in _promtool(promtool_bin, "test", "rules", "alerts-test.yaml")


def test_every_alert_has_a_unit_test() -> None:
    tests = yaml.safe_load((MONITORING / "alerts-test.yaml").read_text())["tests"]
    tested = {a["alertname"] for t in tests for a in t["alert_rule_test"] if a["exp_alerts"]}
    groups = yaml.safe_load(RULES.read_text())["groups"]
    assert tested == {rule["alert"] for group in groups for rule in group["rules"]}


def test_every_dashboard_query_is_valid_promql(promtool_bin: Path, tmp_path: Path) -> None:
    exprs = dashboard_exprs()
    rules = [{"record": f"suanpan:dashboard_query_{i}", "expr": e} for i, e in enumerate(exprs)]
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    out = _promtool(promtool_bin, "check", "rules", str(path))
    assert f"SUCCESS: {len(exprs)} rules found" in out


def test_every_metric_the_dashboard_and_rules_use_is_exported() -> None:
    used = {m for e in dashboard_exprs() + rule_exprs() for m in re.findall(r"\bsuanpan_\w+", e)}
    assert len(used) > 20
    assert used - exported_names() == set()


def test_the_dashboard_covers_what_operators_watch() -> None:
    titles = {p["title"] for p in _panels(DASHBOARD["panels"])}
    for needed in (
        "Queue depth by queue and priority",
        "Wait time until placement (p50, p90)",
        "Placements per cluster and vendor",
        "Accelerators allocated by cluster and model",
        "Allocation ratio by vendor",
        "Scheduling cycle time",
        "Agent heartbeat age",
        "API requests by route and status",
        "API latency (p99) by route",
        "Preemptions and rejections",
    ):
        assert needed in titles
    ids = [p["id"] for p in _panels(DASHBOARD["panels"])]
    assert len(ids) == len(set(ids))
    for panel in _panels(DASHBOARD["panels"]):
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}"
