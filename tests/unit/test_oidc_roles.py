"""How an OIDC token's groups claim maps to a role (no provider needed)."""

from __future__ import annotations

from typing import Any

import pytest

from api.oidc import OidcVerifier, looks_like_jwt
from federation.errors import Forbidden
from federation.hubconfig import GroupRole, OidcConfig

VERIFIER = OidcVerifier(
    OidcConfig(
        issuer="https://idp.example.com",
        audience="suanpan",
        groups_claim="realm_access.roles",
        admin_groups=("ops",),
        groups=(GroupRole("ml-team", "ml", "member"), GroupRole("ml-read", "ml", "viewer")),
    )
)


@pytest.mark.parametrize(
    ("roles", "mapped"),
    [
        (["ml-read", "ml-team"], ("member", "ml")),  # the first mapping in the file wins
        (["ml-read"], ("viewer", "ml")),
        ("ml-team", ("member", "ml")),  # a single group as a string
        (["ml-team", "ops"], ("admin", None)),
    ],
)
def test_groups_map_to_roles(roles: Any, mapped: tuple[str, str | None]) -> None:
    claims = {"sub": "alice", "realm_access": {"roles": roles}}
    assert VERIFIER.role_of(claims) == mapped


@pytest.mark.parametrize(
    "claims",
    [
        {"sub": "x", "realm_access": {"roles": ["marketing"]}},
        {"sub": "x", "realm_access": {"roles": [["ml-team"]]}},
        {"sub": "x", "realm_access": "ml-team"},
        {"sub": "x", "groups": ["ml-team"]},  # not the configured claim
    ],
)
def test_no_mapped_group_is_forbidden(claims: dict[str, Any]) -> None:
    with pytest.raises(Forbidden):
        VERIFIER.role_of(claims)


def test_api_tokens_do_not_look_like_jwts() -> None:
    assert looks_like_jwt("eyJh.eyJz.c2ln")
    assert not looks_like_jwt("sp_abc.def.ghi") and not looks_like_jwt("sp_test_admin_token")
