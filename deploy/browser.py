"""Headless Chromium (Debian's package) driven over its DevTools protocol, for the console's
browser tests and the demo's screenshots. The protocol is JSON over a websocket; aiohttp,
already a dependency, speaks both, so no browser driver is needed."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from deploy.local.processes import free_ports

WIDTH, HEIGHT = 1280, 900


class BrowserError(RuntimeError):
    """Chromium is missing, did not start, or a page script failed."""


def chromium_path() -> str:
    """The Chromium binary (`make browser` installs Debian's package)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise BrowserError("no chromium on PATH: run `make browser` (apt-get install chromium)")


class Page:
    """One browser tab."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._ids = itertools.count(1)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Call a DevTools method and return its result (events on the way are dropped)."""
        call_id = next(self._ids)
        await self._ws.send_json({"id": call_id, "method": method, "params": params})
        while True:
            msg = json.loads(await self._ws.receive_str())
            if msg.get("id") == call_id:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg["result"]
                return result

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        out = await self.send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in out:
            raise BrowserError(f"{expression}: {out['exceptionDetails']}")
        return out["result"].get("value")

    async def goto(self, url: str) -> None:
        """Load `url` and wait for its document."""
        await self.send("Page.navigate", url=url)
        await self.wait("document.readyState === 'complete'")

    async def wait(self, expression: str, timeout_s: float = 15.0) -> Any:
        """Poll until `expression` is truthy in the page (a DOM node comes back as `{}`: test
        for it with `!== null`); its value."""
        async with asyncio.timeout(timeout_s):
            while True:
                with contextlib.suppress(BrowserError):
                    value = await self.evaluate(expression)
                    if value:
                        return value
                await asyncio.sleep(0.1)

    async def screenshot(self, path: Path) -> None:
        """A PNG of the whole page at the console's width."""
        height = await self.evaluate("document.documentElement.scrollHeight")
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            width=WIDTH,
            height=max(HEIGHT, min(int(height), 6000)),
            deviceScaleFactor=1,
            mobile=False,
        )
        shot = await self.send("Page.captureScreenshot", format="png")
        await asyncio.to_thread(path.write_bytes, base64.b64decode(shot["data"]))
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            width=WIDTH,
            height=HEIGHT,
            deviceScaleFactor=1,
            mobile=False,
        )


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Page]:
    """A headless Chromium with one tab, 1280 px wide; killed on exit."""
    port = free_ports(1)[0]
    # chromium's helper processes may still write the profile as it goes
    with tempfile.TemporaryDirectory(
        prefix="suanpan-chromium-", ignore_cleanup_errors=True
    ) as profile:
        proc = await asyncio.create_subprocess_exec(
            chromium_path(),
            "--headless=new",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--ignore-certificate-errors",  # the local fleet's hub serves from a per-run CA
            f"--user-data-dir={profile}",
            f"--remote-debugging-port={port}",
            f"--window-size={WIDTH},{HEIGHT}",
            "about:blank",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, so its helpers end with it
        )
        try:
            async with aiohttp.ClientSession() as session:
                target = await _page_target(session, port, proc)
                async with session.ws_connect(target, max_msg_size=64 << 20) as ws:
                    page = Page(ws)
                    await page.send("Page.enable")
                    yield page
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


async def _page_target(
    session: aiohttp.ClientSession, port: int, proc: asyncio.subprocess.Process
) -> str:
    """The websocket URL of the browser's first tab, once its DevTools endpoint answers."""
    async with asyncio.timeout(30):
        while True:
            if proc.returncode is not None:
                raise BrowserError(f"chromium exited with {proc.returncode}")
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"http://127.0.0.1:{port}/json/list") as resp:
                    pages = [t for t in await resp.json() if t["type"] == "page"]
                    if pages:
                        return str(pages[0]["webSocketDebuggerUrl"])
            await asyncio.sleep(0.1)


async def sign_in(page: Page, hub_url: str, token: str) -> None:
    """Open the console on a fresh tab state and sign in with `token` through its form."""
    await page.goto(hub_url + "/ui#/fleet")
    await page.evaluate("sessionStorage.clear()")
    await page.goto(hub_url + "/ui?signin#/fleet")
    await page.evaluate(
        f"document.getElementById('token').value = {json.dumps(token)};"
        "document.getElementById('signin').requestSubmit()"
    )
    await page.wait("document.getElementById('main').dataset.page === 'fleet'")


async def show(page: Page, route: str, name: str) -> None:
    """Open console route `route` (`#/jobs?...`) and wait until it rendered page `name`."""
    await page.evaluate(f"location.hash = {json.dumps(route)}")
    await page.wait(
        f"document.getElementById('main').dataset.route === {json.dumps(route)}"
        f" && document.getElementById('main').dataset.page === {json.dumps(name)}"
    )


async def console_screenshots(
    hub_url: str, token: str, folder: Path, jobs: dict[str, str], services: dict[str, str]
) -> list[Path]:
    """PNGs of every console page, a page per job in `jobs` and per service in `services`
    (file stem -> id), and /docs."""
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    shots: list[Path] = []
    async with chromium() as page:
        await sign_in(page, hub_url, token)
        routes = [("fleet", "#/fleet", "fleet"), ("queues", "#/queues", "queues")]
        routes += [("jobs", "#/jobs", "jobs")]
        routes += [(stem, f"#/jobs/{job_id}", "job") for stem, job_id in jobs.items()]
        routes += [("services", "#/services", "services")]
        routes += [(stem, f"#/services/{sid}", "service") for stem, sid in services.items()]
        for stem, route, name in routes:
            await show(page, route, name)
            if name == "job":  # with the last lines of its first replica's log
                await page.evaluate("document.getElementById('log-form').requestSubmit()")
                await page.wait(
                    "!document.getElementById('logs-note').textContent.endsWith('…')", timeout_s=40
                )
            shots.append(folder / f"{stem}.png")
            await page.screenshot(shots[-1])
        await page.goto(hub_url + "/docs")
        await page.wait("document.querySelectorAll('.opblock').length", timeout_s=20)
        shots.append(folder / "docs.png")
        await page.screenshot(shots[-1])
    return shots
