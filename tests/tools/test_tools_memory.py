"""memory_store and memory_fetch against the real SQLite store (FTS5 index kept by triggers)."""

from __future__ import annotations

import dataclasses

import pytest

from bot.conversation.memory import fts_query, tsquery
from bot.core.tool import CallContext, ToolInvalidArgsError, UnrevertibleError
from tests.support.conformance import snapshot_store
from tests.support.pg_support import on_both_backends
from tools import memory_fetch, memory_store

backend_name = on_both_backends()


def as_sender(ctx: CallContext, sender: str) -> CallContext:
    return dataclasses.replace(ctx, sender=sender)


async def test_memory_store_dry_run_shows_the_text_and_stores_nothing(ctx, store):
    before = await snapshot_store(store)
    preview = await memory_store.build().dry_run(ctx, text="  Likes espresso, no sugar  ")
    assert preview["summary"] == "Remember: Likes espresso, no sugar"
    assert await snapshot_store(store) == before


async def test_memory_store_keeps_the_text_for_the_sender_and_returns_its_id(ctx, store):
    result = await memory_store.build().execute(ctx, text="Wife's birthday is 12 March")
    row = await store.fetchone("SELECT sender, text FROM memories WHERE id = ?", (result["id"],))
    assert (row["sender"], row["text"]) == ("cli:local", "Wife's birthday is 12 March")


async def test_memory_store_refuses_blank_text(ctx):
    with pytest.raises(ToolInvalidArgsError, match="empty"):
        await memory_store.build().execute(ctx, text="   \n ")


async def test_memory_store_revert_deletes_the_memory_and_its_search_entry(ctx, store):
    tool = memory_store.build()
    result = await tool.execute(ctx, text="Allergic to peanuts")
    await tool.revert(ctx, {"text": "Allergic to peanuts"}, result)
    assert await store.fetchone("SELECT 1 FROM memories WHERE id = ?", (result["id"],)) is None
    found = await memory_fetch.build().execute(ctx, query="peanuts")
    assert found["memories"] == []


async def test_memory_store_revert_twice_says_it_is_already_gone(ctx):
    tool = memory_store.build()
    result = await tool.execute(ctx, text="Lives in Turin")
    await tool.revert(ctx, {}, result)
    with pytest.raises(UnrevertibleError, match="already gone"):
        await tool.revert(ctx, {}, result)


async def test_an_undo_from_another_sender_cannot_delete_someone_elses_memory(ctx, store):
    result = await memory_store.build().execute(ctx, text="Private fact")
    with pytest.raises(UnrevertibleError):
        await memory_store.build().revert(as_sender(ctx, "telegram:666"), {}, result)
    assert await store.fetchone("SELECT 1 FROM memories WHERE id = ?", (result["id"],)) is not None


async def test_memory_fetch_ranks_the_best_match_first(ctx):
    store_tool = memory_store.build()
    for text in ("Favourite restaurant is Da Mario in Turin",
                 "Restaurant bookings go through the phone, never apps",
                 "The cat is called Turin, yes like the city"):
        await store_tool.execute(ctx, text=text)
    found = await memory_fetch.build().execute(ctx, query="favourite restaurant Turin")
    assert found["memories"][0]["text"] == "Favourite restaurant is Da Mario in Turin"
    assert found["count"] == 3


async def test_memory_fetch_matches_word_prefixes_and_ignores_case(ctx):
    await memory_store.build().execute(ctx, text="Birthdays: Anna in May")
    found = await memory_fetch.build().execute(ctx, query="BIRTHDAY")
    assert [m["text"] for m in found["memories"]] == ["Birthdays: Anna in May"]


async def test_memory_fetch_never_returns_another_senders_memories(ctx):
    await memory_store.build().execute(as_sender(ctx, "telegram:1"), text="Secret code is 4321")
    await memory_store.build().execute(as_sender(ctx, "telegram:2"), text="My code is blue")
    found = await memory_fetch.build().execute(as_sender(ctx, "telegram:2"), query="code")
    assert [m["text"] for m in found["memories"]] == ["My code is blue"]


STORED = "Value of x is near a b, unbalanced col; drop the table"


@pytest.mark.parametrize("query", [
    "NEAR(a b", '"unbalanced', "a AND OR NOT", "col:value", "x^y", "'; DROP TABLE x", "b*",
])
async def test_memory_fetch_treats_fts_syntax_in_the_query_as_plain_words(ctx, query):
    await memory_store.build().execute(ctx, text=STORED)
    found = await memory_fetch.build().execute(ctx, query=query)
    assert [m["text"] for m in found["memories"]] == [STORED]


@pytest.mark.parametrize("query", ["?!*", "*", "(((", '""'])
async def test_memory_fetch_with_no_words_is_a_clear_error(ctx, query):
    with pytest.raises(ToolInvalidArgsError, match="no words"):
        await memory_fetch.build().execute(ctx, query=query)


async def test_memory_fetch_respects_the_limit_and_explains_an_empty_result(ctx):
    for i in range(4):
        await memory_store.build().execute(ctx, text=f"Plant number {i} needs water")
    assert (await memory_fetch.build().execute(ctx, query="plant", limit=2))["count"] == 2
    empty = await memory_fetch.build().execute(ctx, query="submarine")
    assert empty["memories"] == [] and "ask the user" in empty["note"]


def test_fts_query_quotes_every_term():
    assert fts_query(memory_fetch.search_words('Say "hi" NEAR(me) to-day')) == (
        '"say"* OR "hi" OR "near"* OR "me" OR "to" OR "day"*')


def test_tsquery_quotes_every_term_so_operators_in_the_query_stay_words():
    assert tsquery(memory_fetch.search_words("Don't & birthday | !c <-> d:*")) == (
        "'don':* | 't' | 'birthday':* | 'c' | 'd'")
