"""The Helm charts (deploy/helm) with the real helm: lint, and `helm template` with minimal and
with every-option values, asserting the objects operators rely on; the image recipe they
reference. Server-side dry-run on a real apiserver: tests/e2e/test_helm_dry_run.py."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_agents.extender.config import render, scheduler_config
from federation.catalog import load_catalog
from federation.hubconfig import load_hub_config
from tests.deploy.charts import (
    CHARTS,
    HUB_FULL,
    HUB_MINIMAL,
    MEMBER_FULL,
    MEMBER_MINIMAL,
    RENDERINGS,
    HelmError,
    helm,
    objects,
    template,
    values_file,
)

ROOT = CHARTS.parents[1]
DEFAULT_IMAGE = "registry.example.com/suanpan/suanpan:0.1.0"


def _container(obj: dict[str, Any], name: str) -> dict[str, Any]:
    containers = obj["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == name)


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@pytest.mark.parametrize(("chart", "values"), list(RENDERINGS.values()), ids=list(RENDERINGS))
def test_charts_pass_helm_lint_strict(
    helm_bin: Path, tmp_path: Path, chart: str, values: dict[str, Any]
) -> None:
    out = helm(
        helm_bin, "lint", "--strict", str(CHARTS / chart), "-f", str(values_file(values, tmp_path))
    )
    assert "1 chart(s) linted, 0 chart(s) failed" in out


def test_hub_defaults(helm_bin: Path, tmp_path: Path) -> None:
    objs = objects(template(helm_bin, "suanpan-hub", HUB_MINIMAL, tmp_path))
    assert set(objs) == {
        ("Deployment", "suanpan-hub"),
        ("Job", "suanpan-hub-migrate"),
        ("Service", "suanpan-hub"),
        ("PodDisruptionBudget", "suanpan-hub"),
        ("ServiceAccount", "suanpan-hub"),
    }
    deploy = objs[("Deployment", "suanpan-hub")]
    assert deploy["spec"]["replicas"] == 2
    hub = _container(deploy, "hub")
    assert hub["image"] == DEFAULT_IMAGE
    assert hub["command"][:2] == ["suanpan-hub", "serve"]
    assert hub["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http", "scheme": "HTTP"}
    assert hub["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert hub["resources"]["requests"] and hub["resources"]["limits"]
    assert hub["securityContext"]["readOnlyRootFilesystem"] is True
    assert deploy["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    db = {"secretKeyRef": {"name": "suanpan-hub-db", "key": "database-url"}}
    assert _env(hub) == {"DATABASE_URL": db}  # no admin token: generated and printed once
    job = objs[("Job", "suanpan-hub-migrate")]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert _container(job, "migrate")["command"] == ["suanpan-hub", "migrate"]
    assert _env(_container(job, "migrate")) == {"DATABASE_URL": db}
    assert objs[("PodDisruptionBudget", "suanpan-hub")]["spec"]["minAvailable"] == 1
    assert objs[("Service", "suanpan-hub")]["spec"]["ports"][0]["port"] == 80


def test_hub_every_option(helm_bin: Path, tmp_path: Path) -> None:
    objs = objects(template(helm_bin, "suanpan-hub", HUB_FULL, tmp_path))
    deploy = objs[("Deployment", "suanpan-hub")]
    assert deploy["spec"]["replicas"] == 3
    hub = _container(deploy, "hub")
    assert hub["image"] == "registry.internal/suanpan@sha256:" + "ab" * 32
    env = _env(hub)
    assert env["DATABASE_URL"] == {"secretKeyRef": {"name": "pg", "key": "url"}}
    assert env["SUANPAN_ADMIN_TOKEN"] == {
        "secretKeyRef": {"name": "hub-admin", "key": "admin-token"}
    }
    assert env["SUANPAN_TLS_CERT"] == "/etc/suanpan/tls/tls.crt"
    assert env["SUANPAN_CLIENT_CA"] == "/etc/suanpan/client-ca/ca.crt"
    assert hub["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"  # the hub serves only TLS
    assert hub["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert env["SUANPAN_CONFIG"] == "/etc/suanpan/config/hub.yaml"
    assert env["SUANPAN_CATALOG_OVERRIDES"] == "/etc/suanpan/config/catalog-overrides.yaml"
    assert env["SUANPAN_EXTRA"] == "1"
    volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "hub-tls"
    assert volumes["client-ca"]["secret"]["secretName"] == "agents-ca"
    files = objs[("ConfigMap", "suanpan-hub-config")]["data"]
    assert yaml.safe_load(files["catalog-overrides.yaml"]) == HUB_FULL["catalogOverrides"]
    (tmp_path / "hub.yaml").write_text(files["hub.yaml"])
    assert load_hub_config(tmp_path / "hub.yaml").interval_s == 2.0  # the hub accepts it
    monitor = objs[("ServiceMonitor", "suanpan-hub")]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    monitoring = ROOT / "deploy" / "monitoring"
    rule = objs[("PrometheusRule", "suanpan-hub")]
    assert rule["spec"] == yaml.safe_load((monitoring / "alerts.yaml").read_text())
    dashboard = objs[("ConfigMap", "suanpan-hub-dashboard")]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads((monitoring / "suanpan-dashboard.json").read_text())
    assert json.loads(dashboard["data"]["suanpan-dashboard.json"]) == shipped
    assert objs[("PodDisruptionBudget", "suanpan-hub")]["spec"]["minAvailable"] == 2
    assert objs[("Service", "suanpan-hub")]["spec"]["type"] == "LoadBalancer"


def test_hub_without_migration_and_budget(helm_bin: Path, tmp_path: Path) -> None:
    values = {
        **HUB_MINIMAL,
        "migration": {"enabled": False},
        "podDisruptionBudget": {"enabled": False},
    }
    kinds = {kind for kind, _ in objects(template(helm_bin, "suanpan-hub", values, tmp_path))}
    assert "Job" not in kinds and "PodDisruptionBudget" not in kinds


def test_member_defaults(helm_bin: Path, tmp_path: Path) -> None:
    objs = objects(template(helm_bin, "suanpan-member", MEMBER_MINIMAL, tmp_path))
    agent = _container(objs[("Deployment", "suanpan-member-agent")], "agent")
    assert agent["image"] == DEFAULT_IMAGE
    assert agent["args"] == [
        "--hub=https://hub.example.com",
        "--cluster=beijing-a",
        "--namespace=suanpan",
        "--metrics=0.0.0.0:9464",
        "--keep-finished=3600",  # finished pods kept an hour, for their logs
        "--telemetry-interval=10",  # no exporter: nothing read
    ]
    assert _env(agent) == {
        "SUANPAN_AGENT_TOKEN": {"secretKeyRef": {"name": "suanpan-agent", "key": "token"}}
    }
    assert not any(kind == "Namespace" for kind, _ in objs)  # the agent makes tenants' own
    assert ("Role", "suanpan-member-agent") not in objs  # its writes are cluster-wide
    rules = objs[("ClusterRole", "suanpan-member-agent")]["rules"]
    granted = {(r, v) for rule in rules for r in rule["resources"] for v in rule["verbs"]}
    assert {("namespaces", "create"), ("namespaces", "patch"), ("pods", "patch")} <= granted
    assert ("nodes", "patch") in granted  # the device telemetry annotation
    assert ("configmaps", "patch") in granted
    assert ("pods/log", "get") in granted
    assert ("Secret", "suanpan-member-agent-token") not in objs  # the operator's Secret is used

    scheduler = objs[("Deployment", "suanpan-member-scheduler")]
    assert scheduler["spec"]["replicas"] == 2
    kube = _container(scheduler, "kube-scheduler")
    assert kube["image"] == "registry.k8s.io/kube-scheduler:v1.36.2"
    assert "--config=/etc/suanpan/scheduler/config.yaml" in kube["command"]
    extender = _container(scheduler, "extender")
    assert extender["command"][:2] == ["suanpan-extender", "--listen=127.0.0.1:8888"]
    bound = {(b["roleRef"]["name"]) for (k, _), b in objs.items() if k == "ClusterRoleBinding"}
    assert {"system:kube-scheduler", "system:volume-scheduler"} <= bound

    config = yaml.safe_load(objs[("ConfigMap", "suanpan-member-scheduler")]["data"]["config.yaml"])
    generated = yaml.safe_load(render(scheduler_config(load_catalog())))
    generated["leaderElection"]["resourceNamespace"] = "suanpan-system"
    generated["extenders"][0]["urlPrefix"] = "http://127.0.0.1:8888"
    assert config == generated  # the catalog's managed resources, nothing dropped

    discovery = objs[("DaemonSet", "suanpan-member-discovery")]
    assert _container(discovery, "discovery")["command"] == ["suanpan-discovery"]
    assert ("ServiceMonitor", "suanpan-member-agent") not in objs


def test_member_every_option(helm_bin: Path, tmp_path: Path) -> None:
    objs = objects(template(helm_bin, "suanpan-member", MEMBER_FULL, tmp_path))
    agent_deploy = objs[("Deployment", "suanpan-member-agent")]
    agent = _container(agent_deploy, "agent")
    assert "--namespace=ai-jobs" in agent["args"]
    assert {"--region=east", "--zone=sh-1", "--label=tier=a"} <= set(agent["args"])
    assert {
        "--exporter=http://dcgm.gpu-operator:9400/metrics",
        "--exporter=npu-1=http://10.0.0.7:8082/metrics",
        "--exporter-pods=app=mlu-exporter:30108",
    } <= set(agent["args"])
    env = _env(agent)
    token = {"secretKeyRef": {"name": "suanpan-member-agent-token", "key": "token"}}
    assert env["SUANPAN_AGENT_TOKEN"] == token
    assert env["SUANPAN_BOOTSTRAP_TOKEN"] == {
        "secretKeyRef": {"name": "bootstrap", "key": "bootstrap-token"}
    }
    assert env["SUANPAN_HUB_CA"] == "/etc/suanpan/hub-ca/ca.crt"
    assert env["SUANPAN_CLIENT_CERT"] == "/etc/suanpan/client/tls.crt"
    agent_volumes = {v["name"]: v for v in agent_deploy["spec"]["template"]["spec"]["volumes"]}
    assert agent_volumes["client-cert"]["secret"]["secretName"] == "sh-agent"
    assert objs[("Secret", "suanpan-member-agent-token")]["stringData"] == {
        "token": "sp_trial_token"
    }
    scheduler = objs[("Deployment", "suanpan-member-scheduler")]
    assert scheduler["spec"]["replicas"] == 3
    extender = _container(scheduler, "extender")["command"]
    assert "--policy=fgd" in extender and "--filter-keeps=best" in extender
    monitors = {name for kind, name in objs if kind == "ServiceMonitor"}
    assert monitors == {"suanpan-member-agent", "suanpan-member-scheduler"}
    relabel = objs[("ServiceMonitor", "suanpan-member-agent")]["spec"]["endpoints"][0][
        "relabelings"
    ]
    assert relabel == [{"targetLabel": "cluster", "replacement": "shanghai-b"}]
    assert ("Service", "suanpan-member-extender-metrics") in objs
    discovery = _container(objs[("DaemonSet", "suanpan-member-discovery")], "discovery")
    assert _env(discovery)["PATH"].startswith("/host/usr/local/Ascend/driver/tools:")


def test_member_components_can_be_left_out(helm_bin: Path, tmp_path: Path) -> None:
    values = {**MEMBER_MINIMAL, "scheduler": {"enabled": False}, "discovery": {"enabled": False}}
    kinds = {kind for kind, _ in objects(template(helm_bin, "suanpan-member", values, tmp_path))}
    assert "DaemonSet" not in kinds and "ConfigMap" not in kinds


@pytest.mark.parametrize(
    ("chart", "values", "message"),
    [
        ("suanpan-hub", {}, "database.existingSecret"),
        ("suanpan-member", {**MEMBER_MINIMAL, "cluster": {"name": ""}}, "cluster.name is required"),
        ("suanpan-member", {**MEMBER_MINIMAL, "hub": {"url": ""}}, "hub.url is required"),
        (
            "suanpan-member",
            {**MEMBER_MINIMAL, "agent": {"token": {}}},
            "agent.token.existingSecret",
        ),
    ],
)
def test_required_values_fail_with_a_message(
    helm_bin: Path, tmp_path: Path, chart: str, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(HelmError, match=re.escape(message)):
        template(helm_bin, chart, values, tmp_path)


def test_image_recipe_is_multi_stage_non_root_and_pinned() -> None:
    dockerfile = (ROOT / "deploy" / "image" / "Dockerfile").read_text()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", dockerfile, re.M)
    assert base is not None and re.fullmatch(r"python:3\.11\.\d+-slim-\w+", base[1])
    stages = re.findall(r"^FROM \$\{PYTHON_IMAGE\} AS (\w+)$", dockerfile, re.M)
    assert stages == ["build", "runtime"]
    assert re.search(r"^USER 65532:65532$", dockerfile, re.M)
    assert f"-t {DEFAULT_IMAGE}" in dockerfile


def test_the_charts_run_only_commands_the_image_has(helm_bin: Path, tmp_path: Path) -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    ours = 0
    for chart, values in (("suanpan-hub", HUB_MINIMAL), ("suanpan-member", MEMBER_MINIMAL)):
        for obj in objects(template(helm_bin, chart, values, tmp_path)).values():
            for c in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
                if c["image"] == DEFAULT_IMAGE:
                    assert c["command"][0] in scripts
                    ours += 1
    assert ours == 5  # hub, migration, agent, extender, discovery
