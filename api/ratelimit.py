"""API rate limits: a token bucket per API token and one per tenant, in the memory of each hub
replica (N replicas admit up to N times the configured rates in all).

Every request of an admin, member or viewer takes one unit from its caller's bucket (the API
token's, or the OpenID Connect user's) and, for a caller bound to a tenant, one from the
tenant's; an empty bucket answers 429 with
`Retry-After` (whole seconds until a unit is back). Agents and the health, metrics, OpenAPI and
console endpoints (tag `meta`) are not limited, nor is a request without a valid token (it is
refused before it costs anything).
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable
from dataclasses import dataclass

from aiohttp import web

from api.auth import PRINCIPAL
from api.problems import Handler, problem_response
from api.routes import API
from federation.hubconfig import Bucket, RateLimits
from federation.store.records import Principal
from federation.wire.http import retry_after_header

MAX_BUCKETS = 100_000  # a table this full is emptied (every caller starts with a full burst)
EXEMPT = frozenset(op.operation_id for op in API.operations if op.tag == "meta")


@dataclass
class _Level:
    units: float
    at: float


class TokenBuckets:
    """Buckets of one kind (per token, or per tenant) refilled continuously at one rate."""

    def __init__(self, bucket: Bucket) -> None:
        self.bucket = bucket
        self._levels: dict[Hashable, _Level] = {}

    def wait(self, key: Hashable, now: float) -> float:
        """Seconds until `key` may send a request; when 0, one unit has been taken."""
        level = self._levels.get(key)
        if level is None:
            if len(self._levels) >= MAX_BUCKETS:
                self._levels.clear()
            level = self._levels[key] = _Level(self.bucket.burst, now)
        level.units = min(self.bucket.burst, level.units + (now - level.at) * self.bucket.rate)
        level.at = now
        if level.units >= 1:
            level.units -= 1
            return 0.0
        return (1 - level.units) / self.bucket.rate

    def give_back(self, key: Hashable) -> None:
        """Return the unit just taken (the request was refused by another bucket)."""
        self._levels[key].units += 1


class RateLimiter:
    """The per-token and per-tenant buckets of one hub replica."""

    def __init__(self, per_token: Bucket, per_tenant: Bucket) -> None:
        self.tokens = TokenBuckets(per_token)
        self.tenants = TokenBuckets(per_tenant)

    def wait(self, caller: Principal) -> tuple[float, str]:
        """Seconds `caller` must wait (0: admitted, a unit taken from each of its buckets) and
        which limit it exceeded."""
        now = time.monotonic()
        wait = self.tokens.wait(caller.actor, now)
        if wait > 0 or caller.tenant_id is None:
            return wait, "token"
        wait = self.tenants.wait(caller.tenant_id, now)
        if wait > 0:
            self.tokens.give_back(caller.actor)
        return wait, "tenant"


LIMITER = web.AppKey("rate_limiter", RateLimiter)


def install_rate_limits(app: web.Application, limits: RateLimits) -> None:
    """Give the application its rate limiter, if `limits` enables one."""
    if limits.enabled:
        app[LIMITER] = RateLimiter(limits.per_token, limits.per_tenant)


def _exempt(request: web.Request) -> bool:
    return getattr(request.match_info.route.handler, "__name__", "") in EXEMPT


@web.middleware
async def rate_limit_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer 429 with `Retry-After` to a caller over its token's or its tenant's rate."""
    limiter = request.app.get(LIMITER)
    principal = request.get(PRINCIPAL)
    if limiter is None or principal is None or principal.role == "agent" or _exempt(request):
        return await handler(request)
    wait, scope = limiter.wait(principal)
    if wait <= 0:
        return await handler(request)
    bucket = limiter.tokens.bucket if scope == "token" else limiter.tenants.bucket
    return problem_response(
        429,
        "Too many requests",
        f"over the {scope}'s limit of {bucket.rate:g} requests/s (burst {bucket.burst:g});"
        f" retry after {math.ceil(wait)} s",
        "rate-limited",
        retry_after_header(wait),
    )
