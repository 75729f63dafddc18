"""A loopback TCP proxy that tests and the chaos suite control: forward, cut (a partition:
open connections dropped, new ones refused), delay, heal."""

from __future__ import annotations

import asyncio
import contextlib

from deploy.local.processes import free_ports


class Proxy:
    """Forwards 127.0.0.1:`port` to `target_port`, or to the unix socket `target_path` (a
    PostgreSQL server's, say), until cut."""

    def __init__(
        self, target_port: int = 0, port: int | None = None, target_path: str = ""
    ) -> None:
        self.target_port = target_port
        self.target_path = target_path
        self.port = port or free_ports(1)[0]
        self.delay_s = 0.0  # added before each chunk forwarded
        self.cut_off = False
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        """http:// address of the proxy."""
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Listen."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def close(self) -> None:
        """Stop listening and drop every connection."""
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def cut(self) -> None:
        """Partition: drop open connections, refuse new ones (closed at once) until healed."""
        self.cut_off = True
        for writer in list(self._links):
            writer.transport.abort()
        self._links.clear()

    def heal(self) -> None:
        """Forward again."""
        self.cut_off = False

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_off:
            writer.transport.abort()
            return
        try:
            if self.target_path:
                up_reader, up_writer = await asyncio.open_unix_connection(self.target_path)
            else:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._links |= {writer, up_writer}
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )
        for w in (writer, up_writer):
            self._links.discard(w)
            w.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while chunk := await reader.read(65536):
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                if self.cut_off:
                    return
                writer.write(chunk)
                await writer.drain()
        writer.transport.abort()
