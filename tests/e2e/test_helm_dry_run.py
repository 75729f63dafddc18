"""Both Helm charts, rendered by the real helm, are accepted by a real kube-apiserver
(`kubectl apply --dry-run=server`: admission, schema and RBAC references checked, nothing
stored), with minimal and with every-option values; the rendered kube-scheduler configuration
is accepted by the real kube-scheduler.

The namespaces the charts install into exist for real (a dry-run Namespace is not there for the
Roles inside it); so do minimal ServiceMonitor and PrometheusRule CRDs, which a bare
apiserver lacks.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.local.clusters import Environment
from tests.deploy.charts import (
    MEMBER_MINIMAL,
    NAMESPACE,
    RENDERINGS,
    objects,
    template,
)

pytestmark = pytest.mark.e2e

NAMESPACES = (NAMESPACE, "suanpan", "ai-jobs")


def _crd(kind: str) -> dict[str, Any]:
    """A prometheus-operator CRD of `kind` that accepts any spec (a bare apiserver has none)."""
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


CRDS = [_crd("ServiceMonitor"), _crd("PrometheusRule")]


class Kubectl:
    """kubectl of one local cluster."""

    def __init__(self, env: Environment) -> None:
        self.bin_dir = env.bin_dir
        self.kubeconfig = env.clusters[-1].kubeconfig

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        """kubectl's stdout; with `check`, a non-zero exit fails the test."""
        done = subprocess.run(
            [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0 or not check, done.stderr + done.stdout
        return done.stdout


@pytest.fixture(scope="module")
def kubectl(k8s_clusters: Environment) -> Iterator[Kubectl]:
    """kubectl with the charts' namespaces and the prometheus-operator CRDs in place."""
    kc = Kubectl(k8s_clusters)
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in NAMESPACES
    ]
    kc("apply", "-f", "-", stdin=yaml.safe_dump_all([*namespaces, *CRDS]))
    crds = [f"crd/{c['metadata']['name']}" for c in CRDS]
    kc("wait", "--for=condition=Established", "--timeout=30s", *crds)
    try:
        yield kc
    finally:
        kc("delete", "--wait=false", "--ignore-not-found", *(f"namespace/{n}" for n in NAMESPACES))
        kc("delete", "--ignore-not-found", *crds)


@pytest.mark.parametrize(("chart", "values"), list(RENDERINGS.values()), ids=list(RENDERINGS))
def test_rendered_chart_passes_server_side_dry_run(
    kubectl: Kubectl, helm_bin: Path, tmp_path: Path, chart: str, values: dict[str, Any]
) -> None:
    manifests = template(helm_bin, chart, values, tmp_path)
    out = kubectl("apply", "--dry-run=server", "-f", "-", stdin=manifests)
    lines = out.strip().splitlines()
    assert len(lines) == len(objects(manifests))
    assert all(line.endswith("(server dry run)") for line in lines), out


def test_rendered_scheduler_config_loads_in_kube_scheduler(
    kubectl: Kubectl, helm_bin: Path, tmp_path: Path
) -> None:
    objs = objects(template(helm_bin, "suanpan-member", MEMBER_MINIMAL, tmp_path))
    rendered = yaml.safe_load(
        objs[("ConfigMap", "suanpan-member-scheduler")]["data"]["config.yaml"]
    )
    rendered["clientConnection"] = {"kubeconfig": kubectl.kubeconfig}  # in-cluster in a pod
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(rendered))
    written = tmp_path / "effective.yaml"
    done = subprocess.run(
        [
            str(kubectl.bin_dir / "kube-scheduler"),
            f"--config={config}",
            f"--write-config-to={written}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    effective = yaml.safe_load(written.read_text())
    assert [p["schedulerName"] for p in effective["profiles"]] == ["suanpan-scheduler"]
    assert effective["extenders"][0]["urlPrefix"] == "http://127.0.0.1:8888"
    assert effective["leaderElection"]["resourceNamespace"] == NAMESPACE


RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
# (service account, verb, resource, namespace, allowed): what each component calls, and a
# neighbour of it that it must not get.
EXPECTED_ACCESS = [
    ("agent", "list", "nodes", None, True),
    ("agent", "watch", "pods", None, True),
    ("agent", "create", "namespaces", None, True),  # tenant namespaces, and their labels
    ("agent", "patch", "namespaces", None, True),
    ("agent", "delete", "namespaces", None, False),
    ("agent", "create", "priorityclasses.scheduling.k8s.io", None, True),
    ("agent", "create", "pods", "suanpan-acme", True),
    ("agent", "patch", "pods", "suanpan-acme", True),  # lifts gang gates
    ("agent", "delete", "configmaps", "suanpan-acme", True),
    ("agent", "patch", "configmaps", "suanpan-acme", True),  # rank tables
    ("agent", "get", "pods --subresource=log", "suanpan-acme", True),
    ("agent", "get", "secrets", "suanpan-acme", False),  # never the tenants' secrets
    ("agent", "delete", "nodes", None, False),
    ("scheduler", "create", "pods --subresource=binding", "suanpan", True),
    ("scheduler", "watch", "nodes", None, True),
    ("scheduler", "update", "leases.coordination.k8s.io/suanpan-scheduler", NAMESPACE, True),
    ("scheduler", "update", "leases.coordination.k8s.io/another", NAMESPACE, False),
    ("scheduler", "get", "configmaps/extension-apiserver-authentication", "kube-system", True),
    ("discovery", "patch", "nodes", None, True),
    ("discovery", "delete", "nodes", None, False),
]


def test_member_rbac_grants_each_component_what_it_calls(
    kubectl: Kubectl, helm_bin: Path, tmp_path: Path
) -> None:
    rendered = objects(template(helm_bin, "suanpan-member", MEMBER_MINIMAL, tmp_path))
    rbac = yaml.safe_dump_all([o for (kind, _), o in rendered.items() if kind in RBAC_KINDS])
    kubectl("apply", "-f", "-", stdin=rbac)  # for real: `auth can-i` evaluates stored roles
    try:
        got = []
        for component, verb, resource, namespace, _ in EXPECTED_ACCESS:
            user = f"system:serviceaccount:{NAMESPACE}:suanpan-member-{component}"
            where = [f"--namespace={namespace}"] if namespace else []
            can_i = ["auth", "can-i", verb, *resource.split(), f"--as={user}", *where]
            answer = kubectl(*can_i, check=False)
            got.append(answer.strip() == "yes")
        assert got == [allowed for *_, allowed in EXPECTED_ACCESS]
    finally:
        kubectl("delete", "--ignore-not-found", "-f", "-", stdin=rbac)
