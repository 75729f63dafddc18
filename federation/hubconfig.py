"""The scheduling configuration operators set in a file the hub reads (`--config`,
`SUANPAN_CONFIG`); every field is optional, absent ones keep their defaults.

```yaml
scheduling:
  intervalSeconds: 1.0          # longest wait between cycles
  weights: {packing: 1, performance: 1, locality: 1, balance: 0, cost: 0, retry: 10,
            live_load: 1,  # live_load: clusters whose devices of the flavor are less busy
            growth_room: 2}  # growth_room: elastic jobs start where they can grow
  preemption:
    enabled: true
    compareClusters: 3
    holdMarginSeconds: 60       # a preemptor's freed capacity is held this long after its
                                # victims' grace periods, then released (docs/scheduling.md)
  backfill:                     # reservations for large gangs at the head of their queue
    enabled: true
    reservationsPerQueue: 1     # per queue, or per cohort for the queues of one
    minDevices: 8               # whole devices a gang needs to earn a reservation
    minWaitSeconds: 0           # and how long it must have waited
  priorityAgingSeconds: 0       # +1 priority per this many seconds waited (0: off)
  maxAssignments: 32            # flavor combinations tried per job and cluster
  flavorOrder: preference       # or fastest
  devicePreference: pack        # or spread
health:
  renewSeconds: 2               # agents renew their cluster's lease this often
  notReadyAfterSeconds: 4       # no new work for a cluster whose lease is this old
  offlineAfterSeconds: 8        # the lease: a cluster not renewed this long is lost (Offline)
  massSilenceFraction: 0.5      # more than this share of the fleet silent at once: the hub is
                                # suspected, none is declared lost (1: never suspected)
failover:
  default: fast                 # policy of jobs whose manifest names none: fast or exclusive
  exclusiveMarginSeconds: 40    # exclusive jobs of a lost cluster requeued lease + this later
placementRetry: {backoffSeconds: 30, maxBackoffSeconds: 600, maxFailures: 5}
gang: {timeoutSeconds: 120}     # sent to agents: a gang not bound by then is re-placed
oidc:                           # accept bearer JWTs of an OpenID Connect provider (off if absent)
  issuer: https://login.example.com/realms/ml   # https, or http on loopback only
  audience: suanpan
  jwksUri: null                 # default: discovered at issuer/.well-known/openid-configuration
  algorithms: [RS256, ES256]    # asymmetric ones only
  clockSkewSeconds: 60
  groupsClaim: groups
  adminGroups: [platform-admins]
  groups:                       # first matching entry wins; no match: 403
    - {group: ml-team, tenant: ml, role: member}
  jwksRefreshSeconds: 30        # an unknown key id refetches the keys at most this often
  jwksMaxAgeSeconds: 3600       # keys are refetched when this old
  console:                      # the web console signs users in as this public client
    clientId: suanpan-console   # (authorization code with PKCE, no secret; off if absent)
    scopes: [openid, profile]
audit: {keepDays: 90}           # audit records older than this are deleted
rateLimits:                     # token buckets per hub replica: requests/s and burst
  enabled: true
  perToken: {rate: 100, burst: 200}
  perTenant: {rate: 200, burst: 400}
registration:
  autoAccept: []                # cluster names (shell globs, e.g. "lab-*") accepted on register
  credentialTtlSeconds: 86400   # an agent credential's lifetime; the agent renews it before
  renewalGraceSeconds: 60       # a renewed credential keeps working this long
services:
  intervalSeconds: 2            # the service controller runs this often (leader only)
  stuckAfterSeconds: 10         # a shard below its cap this long without growing is full:
                                # its deficit goes to another shard or a new cluster
```
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from federation.scheduling.framework import DEFAULT_WEIGHTS, SchedulerConfig
from federation.scheduling.plugins import DEFAULT_REGISTRY
from federation.spec import FailoverPolicy

CONFIG_ENV = "SUANPAN_CONFIG"


@dataclass(frozen=True)
class RetryPolicy:
    """How a job whose placement the cluster could not start is re-placed."""

    backoff_s: float = 30.0
    max_backoff_s: float = 600.0
    max_failures: int = 5  # failed placements after which the job fails

    def delay(self, failures: int) -> float:
        """Seconds before the next placement after `failures` failed ones (doubling, capped)."""
        return float(min(self.max_backoff_s, self.backoff_s * 2 ** max(0, failures - 1)))


DEFAULT_RETRY = RetryPolicy()


@dataclass(frozen=True)
class HealthConfig:
    """The cluster lease: how often agents renew it, when a cluster gets no new work
    (NotReady), when it is lost (Offline, the lease), and how its jobs are requeued."""

    not_ready_after_s: float = 4.0
    offline_after_s: float = 8.0
    renew_s: float = 2.0
    default_failover: FailoverPolicy = "fast"
    exclusive_margin_s: float = 40.0  # above the agent's pod grace period (30 s)
    mass_silence_fraction: float = 0.5  # more silent than this share: suspect the hub itself


OidcRole = Literal["member", "viewer"]
ASYMMETRIC_ALGS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


@dataclass(frozen=True)
class GroupRole:
    """Members of an OIDC group get `role` in `tenant`."""

    group: str
    tenant: str
    role: OidcRole


@dataclass(frozen=True)
class ConsoleClient:
    """The web console's registration at the provider: a public client (no secret) that
    signs users in with the authorization-code flow and PKCE, redirecting back to `/ui`."""

    client_id: str
    scopes: tuple[str, ...] = ("openid", "profile")


@dataclass(frozen=True)
class OidcConfig:
    """An OpenID Connect provider whose bearer JWTs the hub accepts, and how groups map to
    roles (admin groups first, then the first matching tenant mapping)."""

    issuer: str
    audience: str
    jwks_uri: str | None = None
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    clock_skew_s: float = 60.0
    groups_claim: str = "groups"
    admin_groups: tuple[str, ...] = ()
    groups: tuple[GroupRole, ...] = ()
    jwks_refresh_s: float = 30.0
    jwks_max_age_s: float = 3600.0
    console: ConsoleClient | None = None


@dataclass(frozen=True)
class Bucket:
    """A token bucket's refill rate (requests per second) and its capacity (the burst)."""

    rate: float
    burst: float


@dataclass(frozen=True)
class RateLimits:
    """API request rates per token and per tenant (agents and health/metrics are exempt)."""

    enabled: bool = True
    per_token: Bucket = Bucket(100.0, 200.0)
    per_tenant: Bucket = Bucket(200.0, 400.0)


@dataclass(frozen=True)
class RegistrationConfig:
    """Cluster registration: which names need no administrator's acceptance, and how long an
    agent credential lives (and its predecessor after a renewal)."""

    auto_accept: tuple[str, ...] = ()
    credential_ttl_s: float = 86400.0
    renewal_grace_s: float = 60.0

    def accepts(self, cluster: str) -> bool:
        """Whether the auto-accept policy accepts cluster `cluster` without an administrator."""
        return any(fnmatchcase(cluster, pattern) for pattern in self.auto_accept)


@dataclass(frozen=True)
class ServiceConfig:
    """How often the service controller runs, and how long a shard below its cap may go
    without growing before it counts as stuck (its cluster has no room)."""

    interval_s: float = 2.0
    stuck_after_s: float = 10.0


@dataclass(frozen=True)
class HubConfig:
    """Everything the operators' file sets."""

    interval_s: float = 1.0
    cycle_target_s: float = 1.0  # a cycle's window of a long queue is sized to take this long
    hold_margin_s: float = 60.0  # a preemptor's hold outlives its victims' grace by this much
    core: SchedulerConfig = field(default_factory=SchedulerConfig)
    health: HealthConfig = field(default_factory=HealthConfig)
    retry: RetryPolicy = DEFAULT_RETRY
    gang_timeout_s: float = 120.0
    history_interval_s: float = 60.0  # allocation sampled this often (leader only)
    history_keep_s: float = 86400.0  # and kept this long
    oidc: OidcConfig | None = None
    audit_keep_s: float = 90 * 86400.0  # audit records are kept this long
    rate_limits: RateLimits = RateLimits()
    registration: RegistrationConfig = field(default_factory=RegistrationConfig)
    services: ServiceConfig = field(default_factory=ServiceConfig)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


Seconds = float


class _Preemption(_File):
    enabled: bool = True
    compare_clusters: int = Field(default=3, ge=0, alias="compareClusters")
    hold_margin_seconds: Seconds = Field(default=60.0, ge=0, le=3600, alias="holdMarginSeconds")


class _Backfill(_File):
    enabled: bool = True
    reservations_per_queue: int = Field(default=1, ge=0, le=100, alias="reservationsPerQueue")
    min_devices: int = Field(default=8, ge=1, alias="minDevices")
    min_wait_seconds: Seconds = Field(default=0.0, ge=0, alias="minWaitSeconds")


class _Scheduling(_File):
    interval_seconds: Seconds = Field(default=1.0, gt=0, le=60, alias="intervalSeconds")
    cycle_target_seconds: Seconds = Field(default=1.0, gt=0, le=60, alias="cycleTargetSeconds")
    weights: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    preemption: _Preemption = _Preemption()
    backfill: _Backfill = _Backfill()
    priority_aging_seconds: Seconds = Field(default=0.0, ge=0, alias="priorityAgingSeconds")
    max_assignments: int = Field(default=32, ge=1, le=4096, alias="maxAssignments")
    flavor_order: Literal["preference", "fastest"] = Field(
        default="preference", alias="flavorOrder"
    )
    device_preference: Literal["pack", "spread"] = Field(default="pack", alias="devicePreference")


class _Health(_File):
    renew_seconds: Seconds = Field(default=2.0, gt=0, le=60, alias="renewSeconds")
    not_ready_after_seconds: Seconds = Field(default=4.0, gt=0, alias="notReadyAfterSeconds")
    offline_after_seconds: Seconds = Field(default=8.0, gt=0, alias="offlineAfterSeconds")
    mass_silence_fraction: float = Field(default=0.5, ge=0, le=1, alias="massSilenceFraction")


class _Failover(_File):
    default: FailoverPolicy = "fast"
    exclusive_margin_seconds: Seconds = Field(default=40.0, ge=0, alias="exclusiveMarginSeconds")


class _Retry(_File):
    backoff_seconds: Seconds = Field(default=30.0, ge=0, alias="backoffSeconds")
    max_backoff_seconds: Seconds = Field(default=600.0, ge=0, alias="maxBackoffSeconds")
    max_failures: int = Field(default=5, ge=1, le=100, alias="maxFailures")


class _Gang(_File):
    timeout_seconds: Seconds = Field(default=120.0, gt=0, le=3600, alias="timeoutSeconds")


class _History(_File):
    interval_seconds: Seconds = Field(default=60.0, ge=1, le=3600, alias="intervalSeconds")
    keep_seconds: Seconds = Field(default=86400.0, gt=0, le=90 * 86400, alias="keepSeconds")


def _provider_url(url: str) -> str:
    """An identity provider's URL: https, or http to a loopback address (tests, sidecars)."""
    parts = urlsplit(url)
    if not parts.hostname or parts.scheme not in ("https", "http"):
        raise ValueError("must be an absolute http(s) URL")
    if parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
        raise ValueError("must use https (http is allowed on loopback only)")
    return url


ProviderUrl = Annotated[str, AfterValidator(_provider_url)]


class _GroupRole(_File):
    group: str = Field(min_length=1)
    tenant: str = Field(min_length=1)
    role: OidcRole = "member"


class _ConsoleClient(_File):
    client_id: str = Field(min_length=1, max_length=255, alias="clientId")
    scopes: list[Annotated[str, Field(pattern=r"^[!#-\[\]-~]+$")]] = Field(
        default_factory=lambda: ["openid", "profile"], min_length=1
    )

    @field_validator("scopes")
    @classmethod
    def _openid(cls, scopes: list[str]) -> list[str]:
        if "openid" not in scopes:
            raise ValueError("must include openid")
        return scopes


class _Oidc(_File):
    issuer: ProviderUrl
    audience: str = Field(min_length=1)
    jwks_uri: ProviderUrl | None = Field(default=None, alias="jwksUri")
    algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256"], min_length=1)
    clock_skew_seconds: Seconds = Field(default=60.0, ge=0, le=600, alias="clockSkewSeconds")
    groups_claim: str = Field(default="groups", min_length=1, alias="groupsClaim")
    admin_groups: list[str] = Field(default_factory=list, alias="adminGroups")
    groups: list[_GroupRole] = Field(default_factory=list)
    jwks_refresh_seconds: Seconds = Field(default=30.0, ge=0, le=3600, alias="jwksRefreshSeconds")
    jwks_max_age_seconds: Seconds = Field(default=3600.0, gt=0, le=86400, alias="jwksMaxAgeSeconds")
    console: _ConsoleClient | None = None

    @field_validator("algorithms")
    @classmethod
    def _asymmetric(cls, algs: list[str]) -> list[str]:
        bad = sorted(set(algs) - ASYMMETRIC_ALGS)
        if bad:
            raise ValueError(f"{bad} not allowed: one of {sorted(ASYMMETRIC_ALGS)}")
        return algs

    def config(self) -> OidcConfig:
        return OidcConfig(
            issuer=self.issuer,
            audience=self.audience,
            jwks_uri=self.jwks_uri,
            algorithms=tuple(self.algorithms),
            clock_skew_s=self.clock_skew_seconds,
            groups_claim=self.groups_claim,
            admin_groups=tuple(self.admin_groups),
            groups=tuple(GroupRole(g.group, g.tenant, g.role) for g in self.groups),
            jwks_refresh_s=self.jwks_refresh_seconds,
            jwks_max_age_s=self.jwks_max_age_seconds,
            console=(
                ConsoleClient(self.console.client_id, tuple(self.console.scopes))
                if self.console
                else None
            ),
        )


class _Audit(_File):
    keep_days: float = Field(
        default=HubConfig.audit_keep_s / 86400, gt=0, le=3660, alias="keepDays"
    )


class _Bucket(_File):
    rate: float = Field(gt=0, le=1e6)
    burst: float = Field(ge=1, le=1e7)

    @classmethod
    def of(cls, bucket: Bucket) -> _Bucket:
        return cls(rate=bucket.rate, burst=bucket.burst)


class _RateLimits(_File):
    enabled: bool = True
    per_token: _Bucket = Field(default=_Bucket.of(RateLimits.per_token), alias="perToken")
    per_tenant: _Bucket = Field(default=_Bucket.of(RateLimits.per_tenant), alias="perTenant")


class _Registration(_File):
    auto_accept: list[str] = Field(default_factory=list, alias="autoAccept")
    credential_ttl_seconds: Seconds = Field(
        default=86400.0, ge=60, le=365 * 86400, alias="credentialTtlSeconds"
    )
    renewal_grace_seconds: Seconds = Field(default=60.0, ge=0, le=3600, alias="renewalGraceSeconds")


class _Services(_File):
    interval_seconds: Seconds = Field(default=2.0, gt=0, le=60, alias="intervalSeconds")
    stuck_after_seconds: Seconds = Field(default=10.0, ge=0, le=3600, alias="stuckAfterSeconds")


class _HubFile(_File):
    scheduling: _Scheduling = _Scheduling()
    health: _Health = _Health()
    failover: _Failover = _Failover()
    placement_retry: _Retry = Field(default=_Retry(), alias="placementRetry")
    gang: _Gang = _Gang()
    history: _History = _History()
    oidc: _Oidc | None = None
    audit: _Audit = _Audit()
    rate_limits: _RateLimits = Field(default=_RateLimits(), alias="rateLimits")
    registration: _Registration = _Registration()
    services: _Services = _Services()


class ConfigError(ValueError):
    """The configuration file is unreadable or invalid (the message names the field)."""


def parse_hub_config(text: str) -> HubConfig:
    """The hub configuration of a YAML document; raises ConfigError."""
    try:
        raw = yaml.safe_load(text) or {}
        parsed = _HubFile.model_validate(raw)
    except yaml.YAMLError as exc:
        raise ConfigError(f"not YAML: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(problems) from exc
    s = parsed.scheduling
    if parsed.health.offline_after_seconds <= parsed.health.not_ready_after_seconds:
        raise ConfigError("health.offlineAfterSeconds must exceed health.notReadyAfterSeconds")
    if parsed.health.renew_seconds * 2 > parsed.health.offline_after_seconds:
        raise ConfigError("health.renewSeconds must be at most half of health.offlineAfterSeconds")
    core = replace(
        SchedulerConfig(),
        score_weights=dict(s.weights),
        preemption=s.preemption.enabled,
        preemption_compare=s.preemption.compare_clusters,
        priority_aging_s=s.priority_aging_seconds,
        backfill=s.backfill.enabled,
        reservations_per_queue=s.backfill.reservations_per_queue,
        reservation_min_devices=s.backfill.min_devices,
        reservation_min_wait_s=s.backfill.min_wait_seconds,
        max_assignments=s.max_assignments,
        flavor_order=s.flavor_order,
        device_preference=s.device_preference,
    )
    try:
        DEFAULT_REGISTRY.profile(core)
    except ValueError as exc:
        raise ConfigError(f"scheduling.weights: {exc}") from exc
    r = parsed.placement_retry
    limits = parsed.rate_limits
    return HubConfig(
        interval_s=s.interval_seconds,
        cycle_target_s=s.cycle_target_seconds,
        hold_margin_s=s.preemption.hold_margin_seconds,
        core=core,
        health=HealthConfig(
            parsed.health.not_ready_after_seconds,
            parsed.health.offline_after_seconds,
            parsed.health.renew_seconds,
            parsed.failover.default,
            parsed.failover.exclusive_margin_seconds,
            parsed.health.mass_silence_fraction,
        ),
        retry=RetryPolicy(r.backoff_seconds, r.max_backoff_seconds, r.max_failures),
        gang_timeout_s=parsed.gang.timeout_seconds,
        history_interval_s=parsed.history.interval_seconds,
        history_keep_s=parsed.history.keep_seconds,
        oidc=parsed.oidc.config() if parsed.oidc else None,
        audit_keep_s=parsed.audit.keep_days * 86400,
        rate_limits=RateLimits(
            limits.enabled,
            Bucket(limits.per_token.rate, limits.per_token.burst),
            Bucket(limits.per_tenant.rate, limits.per_tenant.burst),
        ),
        registration=RegistrationConfig(
            tuple(parsed.registration.auto_accept),
            parsed.registration.credential_ttl_seconds,
            parsed.registration.renewal_grace_seconds,
        ),
        services=ServiceConfig(
            parsed.services.interval_seconds, parsed.services.stuck_after_seconds
        ),
    )


def load_hub_config(path: Path | None) -> HubConfig:
    """The configuration in `path` (defaults when None); raises ConfigError."""
    if path is None:
        return HubConfig()
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from exc
    return parse_hub_config(text)
