"""Fixtures: real local Kubernetes clusters (deploy/local), built and started once per session.

* `k8s_env_factory(clusters=2, extender_url=None)` starts (or reuses) an environment;
  `extender_url` may contain `{cluster}` or be a {cluster: url} mapping, so a test
  module can plug in its own scheduler extender.  Every environment is torn down at
  session end, also when tests fail.
* `k8s_clusters`: 2 clusters without extender; parametrize it indirectly with
  `{"clusters": N, "extender_url": URL}` for another shape.
* `extended_clusters`: 2 clusters whose schedulers call `suanpan-extender`, one extender
  process per cluster (tests may stop and start one; they are stopped at session end).
* `kc` / `ns`: a client of, and a fresh namespace (emptied and deleted after the test) in, the
  cluster of the requesting module's `stack` fixture (anything with `.cluster`).

The binaries are built (cold: minutes) right after collection when a selected test
needs them, so the build does not count against a single test's timeout.  If they
cannot be built, the fixtures fail (never skip).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from deploy.local.binaries import BuildError, ensure_binaries
from deploy.local.clusters import ClustersError, Environment, down, up
from deploy.local.extender import ExtenderProcess
from deploy.local.kube import KubeClient, KubeError, wait_for
from deploy.local.processes import free_ports

ExtenderURL = str | Mapping[str, str] | None


class K8sEnvFactory:
    """Starts local cluster environments on demand and stops them all on close()."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self._envs: dict[tuple[int, str], Environment] = {}

    def __call__(self, clusters: int = 2, extender_url: ExtenderURL = None) -> Environment:
        """Return a running environment with `clusters` clusters and this extender URL."""
        if not 1 <= clusters <= 3:
            raise ValueError("the e2e fixtures support 1..3 clusters")
        key_url = repr(sorted(extender_url.items())) if isinstance(extender_url, Mapping) else ""
        key = (clusters, key_url or str(extender_url))
        if key not in self._envs:
            try:
                self._envs[key] = asyncio.run(
                    up(clusters, extender_url=extender_url, bin_dir=self.bin_dir)
                )
            except ClustersError as exc:
                pytest.fail(f"local clusters did not come up: {exc}", pytrace=False)
        return self._envs[key]

    def close(self) -> None:
        """Stop every environment started by this factory."""
        envs, self._envs = list(self._envs.values()), {}
        for env in envs:
            asyncio.run(down(env.workdir))


_build: list[Path | BuildError] = []


def _built() -> Path | BuildError:
    if not _build:
        try:
            _build.append(ensure_binaries())
        except BuildError as exc:
            _build.append(exc)
    return _build[0]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the binaries before the first test if any selected test needs them."""
    if session.config.option.collectonly:
        return
    if any("k8s_bin_dir" in getattr(item, "fixturenames", ()) for item in session.items):
        _built()


@pytest.fixture(scope="session")
def k8s_bin_dir() -> Path:
    """Directory with kube-apiserver, kube-scheduler, kcm, kubectl, kwok, etcd (built once)."""
    result = _built()
    if isinstance(result, BuildError):
        pytest.fail(f"cannot build the local Kubernetes binaries: {result}", pytrace=False)
    return result


@pytest.fixture(scope="session")
def k8s_env_factory(k8s_bin_dir: Path) -> Iterator[K8sEnvFactory]:
    """Session-wide factory of local cluster environments (see module docstring)."""
    factory = K8sEnvFactory(k8s_bin_dir)
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture(scope="session")
def k8s_clusters(k8s_env_factory: K8sEnvFactory, request: pytest.FixtureRequest) -> Environment:
    """Two running clusters without extender (or the shape given by indirect parametrization)."""
    shape = getattr(request, "param", {})
    return k8s_env_factory(shape.get("clusters", 2), shape.get("extender_url"))


@dataclass
class ExtendedClusters:
    """Clusters whose schedulers call our extender, and the extender of each."""

    env: Environment
    extenders: dict[str, ExtenderProcess] = field(default_factory=dict)


@pytest.fixture(scope="session")
def extended_clusters(
    k8s_env_factory: K8sEnvFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ExtendedClusters]:
    """Two clusters whose schedulers call `suanpan-extender`, one process per cluster."""
    names = ("dc-beijing", "dc-shanghai")  # the profile's first two
    ports = dict(zip(names, free_ports(2), strict=True))
    env = k8s_env_factory(2, {name: f"http://127.0.0.1:{port}" for name, port in ports.items()})
    logs = tmp_path_factory.mktemp("extenders")
    shared = ExtendedClusters(env)
    for cs in env.clusters:
        extender = ExtenderProcess(cs.kubeconfig, ports[cs.name], logs / f"{cs.name}.log")
        extender.start()
        shared.extenders[cs.name] = extender
    try:
        yield shared
    finally:
        for extender in shared.extenders.values():
            extender.stop()


@pytest.fixture
async def kc(stack: Any) -> AsyncIterator[KubeClient]:
    """An admin client of the module's `stack` cluster."""
    async with stack.cluster.client() as client:
        yield client


@pytest.fixture
async def ns(kc: KubeClient) -> AsyncIterator[str]:
    """A fresh namespace whose pods are deleted (and gone) after the test."""
    async for name in fresh_namespace(kc, f"e2e-{uuid.uuid4().hex[:8]}"):
        yield name


async def fresh_namespace(kc: KubeClient, name: str) -> AsyncIterator[str]:
    """Create namespace `name`, yield it, then delete its pods (waiting until gone) and it."""
    await kc.post("/api/v1/namespaces", {"metadata": {"name": name}})

    async def default_sa() -> bool:
        try:
            await kc.get(f"/api/v1/namespaces/{name}/serviceaccounts/default")
        except KubeError:
            return False
        return True

    await wait_for("default ServiceAccount", default_sa, 30)
    yield name
    await kc.request("DELETE", f"/api/v1/namespaces/{name}/pods?gracePeriodSeconds=0")

    async def gone() -> bool:
        return not (await kc.get(f"/api/v1/namespaces/{name}/pods"))["items"]

    await wait_for("pods deleted", gone, 60)
    await kc.delete(f"/api/v1/namespaces/{name}")
