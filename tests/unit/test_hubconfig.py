"""The operators' scheduling configuration file: every field read, bad ones refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from federation.hubconfig import (
    Bucket,
    ConfigError,
    ConsoleClient,
    GroupRole,
    HubConfig,
    OidcConfig,
    RateLimits,
    ServiceConfig,
    load_hub_config,
    parse_hub_config,
)

FULL = """
scheduling:
  intervalSeconds: 0.5
  cycleTargetSeconds: 2.5
  weights: {packing: 2, performance: 1, locality: 0, retry: 5}
  preemption: {enabled: false, compareClusters: 0, holdMarginSeconds: 15}
  backfill: {enabled: false, reservationsPerQueue: 3, minDevices: 16, minWaitSeconds: 120}
  priorityAgingSeconds: 60
  maxAssignments: 8
  flavorOrder: fastest
  devicePreference: spread
health: {renewSeconds: 1, notReadyAfterSeconds: 5, offlineAfterSeconds: 10, massSilenceFraction: 1}
failover: {default: exclusive, exclusiveMarginSeconds: 12}
placementRetry: {backoffSeconds: 1, maxBackoffSeconds: 4, maxFailures: 3}
gang: {timeoutSeconds: 30}
history: {intervalSeconds: 10, keepSeconds: 3600}
audit: {keepDays: 7}
rateLimits: {enabled: false, perToken: {rate: 5, burst: 10}, perTenant: {rate: 20, burst: 40}}
services: {intervalSeconds: 0.5, stuckAfterSeconds: 4}
"""


def test_every_field_is_read() -> None:
    config = parse_hub_config(FULL)
    assert config.interval_s == 0.5
    assert config.cycle_target_s == 2.5
    assert dict(config.core.score_weights) == {
        "packing": 2,
        "performance": 1,
        "locality": 0,
        "retry": 5,
    }
    assert config.core.preemption is False and config.core.preemption_compare == 0
    assert config.hold_margin_s == 15
    assert config.core.backfill is False and config.core.reservations_per_queue == 3
    assert config.core.reservation_min_devices == 16
    assert config.core.reservation_min_wait_s == 120
    assert config.core.priority_aging_s == 60 and config.core.max_assignments == 8
    assert (config.core.flavor_order, config.core.device_preference) == ("fastest", "spread")
    assert (config.health.not_ready_after_s, config.health.offline_after_s) == (5, 10)
    assert config.health.renew_s == 1 and config.health.default_failover == "exclusive"
    assert config.health.exclusive_margin_s == 12 and config.health.mass_silence_fraction == 1
    assert [config.retry.delay(n) for n in (1, 2, 3, 4)] == [1, 2, 4, 4]
    assert config.retry.max_failures == 3 and config.gang_timeout_s == 30
    assert config.history_interval_s == 10 and config.history_keep_s == 3600
    assert config.audit_keep_s == 7 * 86400
    assert config.rate_limits == RateLimits(False, Bucket(5, 10), Bucket(20, 40))
    assert config.services == ServiceConfig(interval_s=0.5, stuck_after_s=4)


def test_absent_file_and_empty_document_are_the_defaults(tmp_path: Path) -> None:
    assert load_hub_config(None) == HubConfig()
    empty = tmp_path / "c.yaml"
    empty.write_text("")
    assert load_hub_config(empty) == HubConfig()


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("scheduling: {weights: {nope: 1}}", "nope"),
        ("scheduling: {preemption: {enabled: 'off'}}", "scheduling.preemption.enabled"),
        ("scheduling: {backfill: {minDevices: 0}}", "scheduling.backfill.minDevices"),
        ("scheduling: {maxAssignments: 0}", "scheduling.maxAssignments"),
        ("scheduling: {cycleTargetSeconds: 0}", "scheduling.cycleTargetSeconds"),
        ("gang: {timeoutSeconds: -1}", "gang.timeoutSeconds"),
        ("gang: {timeout: 3}", "gang.timeout"),
        ("history: {intervalSeconds: 0}", "history.intervalSeconds"),
        ("health: {notReadyAfterSeconds: 50, offlineAfterSeconds: 10}", "offlineAfterSeconds"),
        ("health: {renewSeconds: 5, offlineAfterSeconds: 8}", "renewSeconds"),
        ("failover: {default: twice}", "failover.default"),
        ("health: {massSilenceFraction: 1.5}", "health.massSilenceFraction"),
        ("audit: {keepDays: 0}", "audit.keepDays"),
        ("rateLimits: {perToken: {rate: 0, burst: 1}}", "rateLimits.perToken.rate"),
        ("rateLimits: {perTenant: {rate: 1}}", "rateLimits.perTenant.burst"),
        ("scheduling: [1, 2", "not YAML"),
    ],
)
def test_bad_fields_are_refused_by_name(text: str, names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        parse_hub_config(text)


def test_an_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        load_hub_config(tmp_path / "missing.yaml")


OIDC = """
oidc:
  issuer: https://login.example.com/realms/ml
  audience: suanpan
  jwksUri: https://login.example.com/realms/ml/certs
  algorithms: [ES256]
  clockSkewSeconds: 30
  groupsClaim: realm_access.roles
  adminGroups: [platform-admins]
  groups:
    - {group: ml-team, tenant: ml, role: member}
    - {group: ml-observers, tenant: ml, role: viewer}
  jwksRefreshSeconds: 10
  jwksMaxAgeSeconds: 600
  console: {clientId: suanpan-console, scopes: [openid, groups]}
"""


def test_the_oidc_provider_is_read() -> None:
    oidc = parse_hub_config(OIDC).oidc
    assert oidc == OidcConfig(
        issuer="https://login.example.com/realms/ml",
        audience="suanpan",
        jwks_uri="https://login.example.com/realms/ml/certs",
        algorithms=("ES256",),
        clock_skew_s=30,
        groups_claim="realm_access.roles",
        admin_groups=("platform-admins",),
        groups=(GroupRole("ml-team", "ml", "member"), GroupRole("ml-observers", "ml", "viewer")),
        jwks_refresh_s=10,
        jwks_max_age_s=600,
        console=ConsoleClient("suanpan-console", ("openid", "groups")),
    )
    assert HubConfig().oidc is None
    defaults = parse_hub_config("oidc: {issuer: 'http://127.0.0.1:8443/idp', audience: a}").oidc
    assert defaults is not None and defaults.algorithms == ("RS256", "ES256")
    assert defaults.console is None


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("oidc: {issuer: 'http://login.example.com', audience: a}", "oidc.issuer: "),
        ("oidc: {issuer: 'login.example.com', audience: a}", "oidc.issuer: "),
        ("oidc: {issuer: 'https://a.example', audience: a, algorithms: [HS256]}", "algorithms"),
        ("oidc: {issuer: 'https://a.example', audience: a, algorithms: [none]}", "algorithms"),
        ("oidc: {issuer: 'https://a.example', audience: a, algorithms: []}", "algorithms"),
        ("oidc: {issuer: 'https://a.example'}", "oidc.audience"),
        (
            "oidc: {issuer: 'https://a.example', audience: a, groups: [{group: g, tenant: t, "
            "role: admin}]}",
            "oidc.groups.0.role",
        ),
        ("oidc: {issuer: 'https://a.example', audience: a, console: {}}", "oidc.console.clientId"),
        (
            "oidc: {issuer: 'https://a.example', audience: a, console: {clientId: c, "
            "scopes: [profile]}}",
            "oidc.console.scopes",
        ),
    ],
)
def test_a_bad_oidc_provider_is_refused_by_name(text: str, names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        parse_hub_config(text)
