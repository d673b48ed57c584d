"""The commands every channel shares, as a user types them: /help names them all, an unknown
/command is answered instead of reaching the model, /tools shows whole words."""

from __future__ import annotations

import pytest

from bot.core.events import CollectingSink, IncomingMessage, Notice
from bot.runtime.commands import summary


async def say(app, text: str, *, sender: str = "cli:local", is_group: bool = False):
    sink = CollectingSink()
    await app.agent.handle(IncomingMessage(sender=sender, chat="c", text=text,
                                           channel=sender.partition(":")[0], is_group=is_group),
                           sink)
    return sink


async def test_help_lists_approve_and_deny_with_the_other_commands(app_factory):
    app = await app_factory()
    help_text = (await say(app, "/help")).of(Notice)[0].text
    for command in ("/start", "/help", "/whoami", "/tools", "/new", "/stop", "/undo",
                    "/approve ID", "/deny ID"):
        assert command in help_text


@pytest.mark.parametrize("typed", ["/frobnicate", "/Frobnicate please", "/frobnicate@myclaw_bot"])
async def test_an_unknown_command_is_answered_and_never_reaches_the_model(app_factory,
                                                                          fake_anthropic, typed):
    app = await app_factory()
    sink = await say(app, typed)
    assert sink.of(Notice)[0].text == "Unknown command /frobnicate: see /help for the commands."
    assert fake_anthropic.requests == []


async def test_a_message_that_starts_with_a_path_goes_to_the_model(app_factory, fake_anthropic):
    app = await app_factory()
    sink = await say(app, "/etc/hosts is what?")
    assert sink.of(Notice) == []
    assert fake_anthropic.requests[0].json["messages"][-1]["content"][0]["text"] == \
        "/etc/hosts is what?"


async def test_in_a_group_an_unknown_command_not_addressed_to_us_is_left_alone(app_factory,
                                                                               fake_anthropic):
    app = await app_factory({"senders": {"telegram:5": "supervised"}})
    other_bots = await say(app, "/roll 2d6", sender="telegram:5", is_group=True)
    assert other_bots.events == [] and fake_anthropic.requests == []
    ours = await say(app, "/roll@myclaw_bot", sender="telegram:5", is_group=True)
    assert "Unknown command /roll" in ours.of(Notice)[0].text


async def test_tools_shows_each_description_up_to_a_sentence_or_word_boundary(app_factory):
    app = await app_factory()
    lines = (await say(app, "/tools")).of(Notice)[0].text.splitlines()[1:]
    memory = next(line for line in lines if line.startswith("• memory_store"))
    assert "(e" not in memory and not memory.endswith("(e")
    for line in lines:
        last_word = line.rstrip("…").split()[-1]
        assert line.endswith("…") or last_word.isalnum() or last_word[-1] in ")`'", line


@pytest.mark.parametrize(("description", "expected"), [
    ("Read a file. Then more.", "Read a file"),
    ("Remember a fact (e.g. 'Prefers tea'). `x` is the fact.", "Remember a fact (e.g. 'Prefers tea')"),
    ("word " * 40, ("word " * 19).strip() + "…"),
    ("Fetch a page: title, headings, paragraphs and links as [text](url) plus " + "x" * 60,
     "Fetch a page: title, headings, paragraphs and links as [text](url) plus…"),
])
def test_a_description_summary_ends_at_a_sentence_or_a_whole_word(description, expected):
    assert summary(description) == expected
