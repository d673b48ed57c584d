"""History repair and compaction, as pure functions."""

from __future__ import annotations

import pytest

from bot.conversation import history


def user(*blocks):
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks):
    return {"role": "assistant", "content": list(blocks)}


def t(value):
    return {"type": "text", "text": value}


def use(call_id):
    return {"type": "tool_use", "id": call_id, "name": "x", "input": {}}


def result(call_id):
    return {"type": "tool_result", "tool_use_id": call_id, "content": "ok"}


def test_a_valid_history_is_left_as_it_is():
    messages = [user(t("a")), assistant(use("1")), user(result("1")), assistant(t("b"))]
    assert history.repair(messages) == messages


def test_an_unanswered_tool_use_at_the_end_gets_an_error_result():
    repaired = history.repair([user(t("a")), assistant(use("1"), use("2"))])
    assert repaired[-1] == user(history.error_result("1", history.INTERRUPTED),
                                history.error_result("2", history.INTERRUPTED))


def test_a_partly_answered_step_gets_the_missing_results_first():
    repaired = history.repair([user(t("a")), assistant(use("1"), use("2")), user(result("2"), t("next"))])
    assert [b.get("tool_use_id") or b.get("text") for b in repaired[-1]["content"]] == ["1", "2", "next"]


def test_consecutive_same_role_messages_are_merged():
    repaired = history.repair([user(t("a")), user(t("b")), assistant(t("c")), assistant(t("d"))])
    assert repaired == [user(t("a"), t("b")), assistant(t("c"), t("d"))]


def test_orphan_results_and_a_leading_assistant_message_are_dropped():
    repaired = history.repair([assistant(t("hello")), user(result("ghost"), t("hi"))])
    assert repaired == [user(t("hi"))]


def test_string_content_becomes_a_text_block():
    assert history.repair([{"role": "user", "content": "hi"}]) == [user(t("hi"))]


def test_two_assistant_messages_in_a_row_are_merged_and_their_calls_answered():
    repaired = history.repair([user(t("a")), assistant(use("1")), assistant(t("b"))])
    assert repaired[1] == assistant(use("1"), t("b"))
    assert repaired[2] == user(history.error_result("1", history.INTERRUPTED))


async def test_compaction_summarises_old_turns_and_keeps_tool_pairs_together():
    messages = []
    for i in range(40):
        messages += [user(t(f"question {i} " + "x" * 400)), assistant(use(f"c{i}")),
                     user(result(f"c{i}")), assistant(t(f"answer {i}"))]
    seen = []

    async def summarise(transcript: str) -> str:
        seen.append(transcript)
        return "they asked forty questions"

    compacted = await history.compact(messages, budget_tokens=8000, summarise=summarise)
    assert compacted is not None and len(compacted) < len(messages)
    head = compacted[0]["content"][0]["text"]
    assert "they asked forty questions" in head and "<untrusted-" in head  # kept as data
    assert history.repair(compacted) == compacted
    assert compacted[-1] == messages[-1]
    assert "question 0 " in seen[0]


@pytest.mark.parametrize("budget", [10**6])
async def test_compaction_does_nothing_below_the_budget(budget):
    async def summarise(transcript: str) -> str:
        raise AssertionError("should not be called")

    assert await history.compact([user(t("hi"))], budget, summarise) is None
