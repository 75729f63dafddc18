"""`suanpan-agent`: run the agent of one member cluster over its Kubernetes API.

`deploy.sim_agent` runs the same agent over a simulated cluster (benchmarks, development);
production code never imports development tooling.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from cluster_agents.agent import credential
from cluster_agents.agent.agent import Agent, AgentConfig
from cluster_agents.agent.backend import ClusterBackend
from cluster_agents.agent.exporters import ExporterPods, ExporterTarget
from cluster_agents.agent.hub_client import HubApi
from federation.catalog import Catalog, load_catalog
from federation.k8s_names import NAMESPACE_PREFIX_MAX, valid_namespace_prefix
from federation.logs import configure_logging
from federation.tls_client import client_context

log = logging.getLogger("suanpan.agent")


def _share(text: str) -> float:
    """A fraction in (0, 1]."""
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not in (0, 1]")
    return value


def _labels(pairs: Sequence[str]) -> dict[str, str]:
    return dict(p.split("=", 1) for p in pairs)


METRICS_DEFAULT = "127.0.0.1:9464"


def metrics_address(value: str) -> tuple[str, int] | None:
    """`--metrics`: HOST:PORT (port 0 picks a free one) or `off`."""
    if value == "off":
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not HOST:PORT or off")
    return host or "127.0.0.1", int(port)


def namespace_prefix(value: str) -> str:
    """`--namespace`: a DNS label of at most 40 characters (tenant namespaces extend it)."""
    if not valid_namespace_prefix(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a DNS label of at most {NAMESPACE_PREFIX_MAX} characters"
        )
    return value


def exporter_target(value: str) -> ExporterTarget:
    """`--exporter`: [NODE=]URL, an http(s) URL (NODE: the node whose devices it serves, for
    exporters whose series name no node)."""
    node, sep, url = value.partition("=")
    if not sep or "://" in node:
        node, url = "", value
    if not url.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"{value!r} is not [NODE=]http(s)://HOST:PORT/PATH")
    return ExporterTarget(url, node)


def exporter_pods(value: str) -> ExporterPods:
    """`--exporter-pods`: SELECTOR:PORT[/PATH], e.g. app=nvidia-dcgm-exporter:9400."""
    selector, sep, rest = value.rpartition(":")
    port, _, path = rest.partition("/")
    if not sep or not selector or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not LABEL-SELECTOR:PORT[/PATH]")
    return ExporterPods(selector, int(port), "/" + (path or "metrics"))


def _reachable() -> str | None:
    return None


async def _metrics_server(
    registry: CollectorRegistry,
    host: str,
    port: int,
    apiserver_problem: Callable[[], str | None] = _reachable,
) -> tuple[web.AppRunner, int]:
    """/metrics, /healthz and /readyz (503 with `apiserver_problem()` when it is not None)."""

    async def metrics(_: web.Request) -> web.Response:
        response = web.Response(body=generate_latest(registry))
        response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
        return response

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        problem = apiserver_problem()
        return (
            web.Response(text="ok") if problem is None else web.Response(status=503, text=problem)
        )

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise SystemExit(
            f"suanpan-agent: cannot serve /metrics on {host}:{port} ({exc.strerror}); another"
            " agent on this host? pass --metrics HOST:0 (a free port) or --metrics off"
        ) from exc
    return runner, int(runner.addresses[0][1])  # the bound port (what port 0 became)


BackendFactory = Callable[[argparse.Namespace, Catalog, CollectorRegistry], ClusterBackend]


def kubernetes_backend(
    args: argparse.Namespace, catalog: Catalog, registry: CollectorRegistry
) -> ClusterBackend:
    """The cluster behind `--kubeconfig` (or the in-cluster configuration)."""
    from cluster_agents.backends.kubernetes import KubernetesBackend

    return KubernetesBackend(
        args.kubeconfig,
        args.namespace,
        catalog,
        registry=registry,
        exporters=tuple(args.exporter),
        exporter_pods=tuple(args.exporter_pods),
    )


async def _main(args: argparse.Namespace, make_backend: BackendFactory) -> None:
    catalog = load_catalog()
    registry = CollectorRegistry()
    stop = asyncio.Event()
    hub = HubApi(
        args.hub.split(","),
        args.token or os.environ.get("SUANPAN_AGENT_TOKEN", ""),
        registry,
        client_context(args.hub_ca, args.client_cert, args.client_key),
    )
    renewal = None
    if args.credential_file is not None:
        bootstrap_token = os.environ.get("SUANPAN_BOOTSTRAP_TOKEN", "")
        own = await credential.obtain(hub, args.credential_file, args.cluster, bootstrap_token)
        renewal = asyncio.create_task(credential.renew_loop(hub, args.credential_file, own, stop))
    agent = Agent(
        AgentConfig(
            cluster=args.cluster,
            namespace=args.namespace,
            region=args.region,
            zone=args.zone,
            labels=_labels(args.label),
            keep_finished_s=args.keep_finished,
            telemetry_interval_s=args.telemetry_interval,
            metric_interval_s=args.metric_interval,
            reconcile_share=args.reconcile_share,
        ),
        make_backend(args, catalog, registry),
        catalog,
        hub,
        registry,
    )
    runner = None
    if args.metrics is not None:
        host, wanted = args.metrics
        runner, port = await _metrics_server(
            registry, host, wanted, lambda: agent.apiserver_problem
        )
        log.warning("metrics on http://%s:%s/metrics", args.metrics[0], port)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await agent.run(stop)
    finally:
        if renewal is not None:
            renewal.cancel()
        if runner is not None:
            await runner.cleanup()


def parser(prog: str = "suanpan-agent") -> argparse.ArgumentParser:
    """The agent's command line."""
    p = argparse.ArgumentParser(prog=prog, description=__doc__)
    p.add_argument(
        "--hub", required=True, help="hub URL, or several separated by commas (tried in turn)"
    )
    p.add_argument("--token", help="agent token (default $SUANPAN_AGENT_TOKEN)")
    for flag, env, text in (
        ("--hub-ca", "SUANPAN_HUB_CA", "CA bundle the hub's certificate is verified against"),
        ("--client-cert", "SUANPAN_CLIENT_CERT", "client certificate for mTLS (CN: the cluster)"),
        ("--client-key", "SUANPAN_CLIENT_KEY", "the client certificate's key"),
    ):
        value = os.environ.get(env)
        p.add_argument(
            flag,
            type=Path,
            default=Path(value) if value else None,
            help=f"{text} (default ${env}; system CAs without it)"
            if flag == "--hub-ca"
            else f"{text} (default ${env})",
        )
    p.add_argument("--cluster", required=True, help="cluster name the token is bound to")
    p.add_argument(
        "--credential-file",
        type=Path,
        default=os.environ.get("SUANPAN_CREDENTIAL_FILE") or None,
        help="where the cluster's own credential is kept (default $SUANPAN_CREDENTIAL_FILE);"
        " obtained with $SUANPAN_BOOTSTRAP_TOKEN when absent or expired, renewed before expiry",
    )
    p.add_argument("--region", default="")
    p.add_argument("--zone", default="")
    p.add_argument("--label", action="append", default=[], help="cluster label k=v (repeatable)")
    p.add_argument(
        "--namespace",
        type=namespace_prefix,
        default="suanpan",
        help="prefix of the tenant namespaces the agent creates its pods in (<prefix>-<tenant>)",
    )
    p.add_argument(
        "--keep-finished",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="keep finished pods this long after their job ends, for their logs (default 1 h)",
    )
    p.add_argument(
        "--exporter",
        type=exporter_target,
        action="append",
        default=[],
        metavar="[NODE=]URL",
        help="a device exporter's /metrics (DCGM, npu-exporter, mlu-exporter, ...; repeatable);"
        " NODE names the node its devices are on when its series do not (npu-exporter)",
    )
    p.add_argument(
        "--exporter-pods",
        type=exporter_pods,
        action="append",
        default=[],
        metavar="SELECTOR:PORT[/PATH]",
        help="device exporter pods found by label in any namespace, each read on its pod IP"
        " for its own node (repeatable), e.g. app=nvidia-dcgm-exporter:9400",
    )
    p.add_argument(
        "--telemetry-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="read the exporters this often; the hub hears of a device only when its reading"
        " moved (default 10)",
    )
    p.add_argument(
        "--metric-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="read the scaling metric of autoscaled services' ready pods this often (default 5)",
    )
    p.add_argument(
        "--reconcile-share",
        type=_share,
        default=0.25,
        metavar="FRACTION",
        help="under steady churn, at most this share of the agent's time goes to reconciling:"
        " a reconcile of d seconds is followed by d x (1/FRACTION - 1) at least (default 0.25)",
    )
    p.add_argument("--kubeconfig", help="kubeconfig (default: in-cluster configuration)")
    p.add_argument(
        "--metrics",
        type=metrics_address,
        default=METRICS_DEFAULT,
        metavar="HOST:PORT|off",
        help="where to serve /metrics, /healthz and /readyz (503: cluster API unreachable);"
        " default %(default)s; port 0 picks a free port, for several agents on one host;"
        " off serves none",
    )
    return p


def run(args: argparse.Namespace, make_backend: BackendFactory) -> int:
    """Run the agent over the backend `make_backend` builds, until SIGINT/SIGTERM."""
    configure_logging(logging.WARNING)
    asyncio.run(_main(args, make_backend))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `suanpan-agent`."""
    return run(parser().parse_args(argv), kubernetes_backend)


if __name__ == "__main__":
    raise SystemExit(main())
