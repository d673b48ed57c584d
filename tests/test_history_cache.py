"""The bounded history cache: copies out, appends in place, evicts the least recently used."""

from __future__ import annotations

from bot.history_cache import HistoryCache


def msg(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_what_get_returns_can_be_changed_without_touching_the_cache():
    cache = HistoryCache()
    cache.put("s", [msg("a")], 10)
    got, _size = cache.get("s")
    got.append(msg("b"))
    assert cache.get("s") == ([msg("a")], 10)


def test_extend_appends_and_counts_the_size():
    cache = HistoryCache()
    cache.put("s", [msg("a")], 10)
    cache.extend("s", [msg("b")], 5)
    cache.extend("unknown", [msg("c")], 5)  # not cached: nothing to do
    assert cache.get("s") == ([msg("a"), msg("b")], 15)
    assert cache.get("unknown") is None


def test_the_least_recently_used_session_goes_first_when_over_budget():
    cache = HistoryCache(max_chars=100)
    cache.put("old", [msg("a")], 40)
    cache.put("new", [msg("b")], 40)
    cache.get("old")  # used again: now the newest
    cache.extend("new", [msg("c")], 40)
    assert cache.get("old") is None and cache.get("new") is not None
