"""The short fuzzing pass of `make test` against a real hub process (the long one is
`make bench`, bench/api_fuzz.py): schemathesis in every phase with stateful links and negative
data, and hypothesis manifests with hostile strings and numbers. No server error, and no
response the OpenAPI document does not describe."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import api_fuzz
from federation.store.database import Database

pytestmark = pytest.mark.integration


@pytest.fixture
def hub_url(pg_url: str, db: Database, tmp_path: Path) -> Iterator[str]:
    """A hub process over the test database (`db` empties it afterwards)."""
    with api_fuzz.serve_hub(pg_url, tmp_path / "hub.log") as url:
        yield url


# about 4 minutes on CI, twice that when schemathesis crashes and its run is done again, and
# more on a loaded machine: above the suite's 600 s default
@pytest.mark.timeout(1800)
def test_schemathesis_finds_no_server_error_and_no_response_off_the_document(
    hub_url: str, tmp_path: Path
) -> None:
    tenant = api_fuzz.seed(hub_url)
    result = api_fuzz.schemathesis(hub_url, tenant, tmp_path, max_examples=8)
    print(f"schemathesis: {result.cases} cases")
    assert result.cases > 1000
    assert not result.failures, (result.failures, result.output)


def test_hostile_manifests_get_a_job_or_a_precise_problem(hub_url: str) -> None:
    tenant = api_fuzz.seed(hub_url)
    result = api_fuzz.fuzz_manifests(hub_url, tenant, examples=300)
    print(f"manifests: {result.cases} cases, {result.accepted} accepted, {result.refused} refused")
    assert result.cases >= 300 and result.refused > result.cases // 2
    assert not result.server_errors, result.server_errors[:3]
    assert not result.malformed, result.malformed[:3]
