"""Render the Helm charts of deploy/helm with the real helm (shared by the unit and e2e tests)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

CHARTS = Path(__file__).resolve().parents[2] / "deploy" / "helm"
NAMESPACE = "suanpan-system"
HUB_MINIMAL: dict[str, Any] = {"database": {"existingSecret": "suanpan-hub-db"}}
MEMBER_MINIMAL: dict[str, Any] = {
    "cluster": {"name": "beijing-a"},
    "hub": {"url": "https://hub.example.com"},
    "agent": {"token": {"existingSecret": "suanpan-agent"}},
}
# Every optional part switched on, every default changed somewhere.
HUB_FULL: dict[str, Any] = {
    "replicaCount": 3,
    "image": {"repository": "registry.internal/suanpan", "digest": "sha256:" + "ab" * 32},
    "database": {"existingSecret": "pg", "key": "url"},
    "adminToken": {"existingSecret": "hub-admin"},
    "config": {"scheduling": {"intervalSeconds": 2.0}, "gang": {"timeoutSeconds": 300}},
    "catalogOverrides": {"models": {"nvidia/H100": {"speed": 3.5}}},
    "tls": {"secretName": "hub-tls", "clientCASecret": "agents-ca"},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "prometheusRule": {"enabled": True},
    "grafanaDashboard": {"enabled": True},
    "podDisruptionBudget": {"minAvailable": 2},
    "service": {"type": "LoadBalancer", "port": 443},
    "extraEnv": [{"name": "SUANPAN_EXTRA", "value": "1"}],
}
MEMBER_FULL: dict[str, Any] = {
    "cluster": {"name": "shanghai-b", "region": "east", "zone": "sh-1", "labels": {"tier": "a"}},
    "hub": {"url": "https://hub.example.com", "caSecret": "hub-ca", "clientCertSecret": "sh-agent"},
    "workloadNamespace": {"name": "ai-jobs"},
    "agent": {
        "token": {"value": "sp_trial_token"},
        "bootstrapToken": {"existingSecret": "bootstrap"},
        "telemetry": {
            "exporters": [
                "http://dcgm.gpu-operator:9400/metrics",
                "npu-1=http://10.0.0.7:8082/metrics",
            ],
            "exporterPods": ["app=mlu-exporter:30108"],
        },
    },
    "scheduler": {"replicas": 3},
    "extender": {"listenAddress": "0.0.0.0", "policy": "fgd"},
    "discovery": {"hostToolPaths": ["/usr/local/Ascend/driver/tools"]},
    "serviceMonitor": {"enabled": True},
}

# (chart, values) pairs each chart test renders, with pytest ids.
RENDERINGS = {
    "hub-minimal": ("suanpan-hub", HUB_MINIMAL),
    "hub-full": ("suanpan-hub", HUB_FULL),
    "member-minimal": ("suanpan-member", MEMBER_MINIMAL),
    "member-full": ("suanpan-member", MEMBER_FULL),
}


class HelmError(RuntimeError):
    """helm failed; the message holds its output."""


def helm(helm_bin: Path, *args: str) -> str:
    """Run helm; its stdout, or HelmError."""
    done = subprocess.run([str(helm_bin), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise HelmError(done.stderr + done.stdout)
    return done.stdout


def values_file(values: Mapping[str, Any], directory: Path) -> Path:
    """`values` written as a values file in `directory`."""
    path = directory / f"values-{abs(hash(yaml.safe_dump(dict(values))))}.yaml"
    path.write_text(yaml.safe_dump(dict(values)))
    return path


def template(helm_bin: Path, chart: str, values: Mapping[str, Any], tmp: Path) -> str:
    """`helm template` of `chart` with `values`, as YAML text."""
    return helm(
        helm_bin,
        "template",
        chart,
        str(CHARTS / chart),
        f"--namespace={NAMESPACE}",
        f"--values={values_file(values, tmp)}",
    )


def objects(manifests: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Rendered objects by (kind, name)."""
    docs = [d for d in yaml.safe_load_all(manifests) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}
