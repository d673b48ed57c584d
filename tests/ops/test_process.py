"""A long-running process builds its long-lived heap with the cyclic collector paused, then
freezes it out of the collector's reach (bot.ops.process.long_lived_heap)."""

from __future__ import annotations

import gc

import pytest

from bot.ops.process import long_lived_heap


@pytest.fixture
def heap():
    """The process's collector as it was, afterwards (frozen objects go back to the collector)."""
    yield
    gc.unfreeze()
    gc.enable()


def test_start_up_runs_without_collections_and_freezes_what_it_built(heap):
    before = gc.get_freeze_count()
    with long_lived_heap():
        assert not gc.isenabled()
        built = [{"n": n} for n in range(1000)]     # containers: objects the collector tracks
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(built)


def test_a_failed_start_up_leaves_the_collector_running_and_freezes_nothing(heap):
    before = gc.get_freeze_count()
    with pytest.raises(RuntimeError), long_lived_heap():
        raise RuntimeError("the store would not open")
    assert gc.isenabled() and gc.get_freeze_count() == before
