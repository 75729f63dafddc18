"""The loop's cache of decoded compiled forms forgets what no read needs, every few reads."""

from __future__ import annotations

import uuid

from federation.controllers.snapshot import PRUNE_EVERY, CompiledCache


def test_forms_no_read_needs_are_forgotten_at_the_next_prune_only() -> None:
    cache = CompiledCache()
    alive, gone = uuid.uuid4(), uuid.uuid4()
    cache._jobs = {(alive, 0): "a form", (gone, 0): "another"}
    cache._placements = {(gone, 1, 1): {}}
    for _ in range(PRUNE_EVERY - 1):
        cache.prune([alive])
    assert set(cache._jobs) == {(alive, 0), (gone, 0)}  # not yet: pruning costs a pass
    cache.prune([alive])
    assert set(cache._jobs) == {(alive, 0)}
    assert cache._placements == {}
