"""HTTP conventions the hub, its clients and the agents share: the headers for a safe retry."""

from __future__ import annotations

import math

IDEMPOTENCY_HEADER = "Idempotency-Key"  # a retried creation returns the first one
RETRY_AFTER = "Retry-After"  # whole seconds until a refused request (503, 429) may be sent again


def retry_after(value: str | None) -> float | None:
    """Seconds of a `Retry-After` header given in seconds (None: absent, a date, or absurd)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < 3600 else None


def retry_after_header(seconds: float) -> dict[str, str]:
    """The `Retry-After` header for a wait of `seconds` (rounded up to whole seconds)."""
    return {RETRY_AFTER: str(math.ceil(seconds))}
