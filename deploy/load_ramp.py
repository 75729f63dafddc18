"""A load a test, the demo or the benchmark controls, served as a service's scaling metric.

Every pod of the service serves a Prometheus page on its own address (pods of the simulated
backend, and of local clusters' loopback nodes, have loopback addresses): each reports an
equal share of `total`, as replicas behind a load balancer share the requests in flight.
"""

from __future__ import annotations

from aiohttp import web


class Load:
    """`metric` = `total` / pods served, on `port` of every address given to `serve`."""

    def __init__(self, metric: str, port: int) -> None:
        self.metric = metric
        self.port = port
        self.total = 0.0
        self._sites: dict[str, web.AppRunner] = {}
        self._app = web.Application()
        self._app.router.add_get("/metrics", self._page)

    async def _page(self, _: web.Request) -> web.Response:
        share = self.total / max(len(self._sites), 1)
        return web.Response(text=f"# TYPE {self.metric} gauge\n{self.metric} {share}\n")

    async def serve(self, addresses: set[str]) -> None:
        """Serve on the addresses of `addresses` not served yet; stop on the others."""
        for ip in addresses - self._sites.keys():
            runner = web.AppRunner(self._app)
            await runner.setup()
            await web.TCPSite(runner, ip, self.port).start()
            self._sites[ip] = runner
        for ip in set(self._sites) - addresses:
            await self._sites.pop(ip).cleanup()

    async def close(self) -> None:
        """Stop serving everywhere."""
        await self.serve(set())
