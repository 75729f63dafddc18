"""Tenant namespaces in member clusters: valid DNS labels, one per tenant, never shared."""

from __future__ import annotations

import argparse
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster_agents.agent.cli import namespace_prefix
from federation.k8s_names import (
    DNS_LABEL,
    in_tenant_namespace,
    tenant_namespace,
    valid_namespace_prefix,
)

tenants = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
prefixes = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?\Z")


def test_a_short_tenant_keeps_its_name() -> None:
    assert tenant_namespace("suanpan", "acme") == "suanpan-acme"


def test_a_long_tenant_is_cut_and_hashed_to_exactly_63_characters() -> None:
    long = "a" * 63
    name = tenant_namespace("suanpan", long)
    assert len(name) == 63
    assert name.startswith("suanpan-aaaa")
    assert name != tenant_namespace("suanpan", "a" * 62)


@given(prefixes, tenants)
def test_every_tenant_namespace_is_a_dns_label_under_the_prefix(prefix: str, tenant: str) -> None:
    name = tenant_namespace(prefix, tenant)
    assert re.fullmatch(DNS_LABEL[1:-1], name) and len(name) <= 63
    assert in_tenant_namespace(prefix, name)


@given(prefixes, tenants, tenants)
def test_two_tenants_never_share_a_namespace(prefix: str, one: str, other: str) -> None:
    if one != other:
        assert tenant_namespace(prefix, one) != tenant_namespace(prefix, other)


def test_a_tenant_named_like_a_long_form_does_not_collide_with_it() -> None:
    long = tenant_namespace("sp", "b" * 63)
    assert tenant_namespace("sp", long.removeprefix("sp-")) != long


@pytest.mark.parametrize(
    ("prefix", "valid"),
    [("suanpan", True), ("a" * 40, True), ("a" * 41, False), ("Suanpan", False), ("-x", False)],
)
def test_the_prefix_leaves_room_for_tenants(prefix: str, valid: bool) -> None:
    assert valid_namespace_prefix(prefix) is valid


def test_only_the_prefix_and_its_tenant_namespaces_are_the_agents() -> None:
    assert in_tenant_namespace("suanpan", "suanpan")
    assert in_tenant_namespace("suanpan", "suanpan-acme")
    assert not in_tenant_namespace("suanpan", "suanpanx")
    assert not in_tenant_namespace("suanpan", "kube-system")


def test_the_agents_namespace_flag_refuses_a_prefix_without_room() -> None:
    assert namespace_prefix("suanpan") == "suanpan"
    with pytest.raises(argparse.ArgumentTypeError, match="at most 40"):
        namespace_prefix("a" * 41)
