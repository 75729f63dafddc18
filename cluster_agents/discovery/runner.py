"""Running vendor tools: a timeout, a missing tool told apart from a failing one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

# (argv, timeout seconds) -> stdout. Raises ToolMissing or ToolFailed.
ToolRunner = Callable[[Sequence[str], float], Awaitable[str]]


class ToolMissing(Exception):
    """The tool is not installed on this node: it has no devices of that vendor."""


class ToolFailed(Exception):
    """The tool is there but failed: non-zero exit, timeout or unreadable output."""


async def run_tool(argv: Sequence[str], time_limit: float) -> str:
    """Run `argv`, return its standard output; kill it after `time_limit` seconds."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
    except FileNotFoundError as exc:
        raise ToolMissing(argv[0]) from exc
    except OSError as exc:
        raise ToolFailed(f"{argv[0]}: cannot start: {exc}") from exc
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), time_limit)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise ToolFailed(f"{argv[0]}: no answer within {time_limit:g}s") from None
    if process.returncode != 0:
        tail = stderr.decode(errors="replace").strip()[-300:]
        raise ToolFailed(f"{' '.join(argv)}: exit status {process.returncode}: {tail}")
    return stdout.decode(errors="replace")
