"""The bounded history cache: copies out, appends in place, evicts the least recently used."""

from __future__ import annotations

from bot.conversation.history_cache import HistoryCache


def msg(text: str, role: str = "user") -> dict:
    return {"role": role, "content": [{"type": "text", "text": text}]}


def reply(text: str) -> dict:
    return msg(text, "assistant")


def test_what_get_returns_can_be_changed_without_touching_the_cache():
    cache = HistoryCache()
    cache.put("s", [msg("a")], 10)
    got, _size = cache.get("s")
    got.append(msg("b"))
    assert cache.get("s") == ([msg("a")], 10)


def test_extend_appends_and_counts_the_size():
    cache = HistoryCache()
    cache.put("s", [msg("a")], 10)
    cache.extend("s", [reply("b")], 5)
    cache.extend("unknown", [msg("c")], 5)  # not cached: nothing to do
    assert cache.get("s") == ([msg("a"), reply("b")], 15)
    assert cache.get("unknown") is None


def test_the_least_recently_used_session_goes_first_when_over_budget():
    cache = HistoryCache(max_chars=100)
    cache.put("old", [msg("a")], 40)
    cache.put("new", [msg("b")], 40)
    cache.get("old")  # used again: now the newest
    cache.extend("new", [reply("c")], 40)
    assert cache.get("old") is None and cache.get("new") is not None


def test_a_write_that_leaves_two_user_messages_in_a_row_drops_the_session():
    cache = HistoryCache()
    cache.put("s", [msg("a")], 10)
    cache.extend("s", [msg("b")], 5)  # the next read loads it from the store, to be repaired
    assert cache.get("s") is None


def test_tool_calls_followed_by_anything_but_all_their_results_drop_the_session():
    calls = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x",
                                               "input": {}},
                                              {"type": "tool_use", "id": "t2", "name": "x",
                                               "input": {}}]}

    def results(*ids: str) -> dict:
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i,
                                             "content": "ok"} for i in ids]}
    cache = HistoryCache()
    cache.put("answered", [msg("a"), calls], 10)
    cache.extend("answered", [results("t1", "t2")], 5)
    assert cache.get("answered") is not None
    cache.put("half", [msg("a"), calls], 10)
    cache.extend("half", [results("t1")], 5)
    assert cache.get("half") is None


def test_the_cache_knows_whether_a_history_holds_an_attachment_from_what_was_put_and_appended():
    photo = {"role": "user", "content": [{"type": "attachment", "kind": "image", "hash": "h"}]}
    cache = HistoryCache()
    assert cache.holds_attachments("s") is None
    cache.put("s", [msg("a"), reply("b")], 10)
    assert cache.holds_attachments("s") is False
    cache.extend("s", [msg("c")])
    assert cache.holds_attachments("s") is False
    cache.extend("s", [reply("d"), photo])
    assert cache.holds_attachments("s") is True
    cache.extend("s", [reply("e")])
    assert cache.holds_attachments("s") is True
    cache.put("loaded", [photo, reply("f")], 10)
    assert cache.holds_attachments("loaded") is True
