"""A long approval preview is shown whole on every channel, and one too long to read is refused."""

from __future__ import annotations

import time

from bot.core.approval_cards import ApprovalNeeded, ApprovalView
from bot.core.events import CollectingSink, IncomingMessage
from channels.discord.approvals import request_text
from channels.discord.rendering import split_message as discord_split
from channels.telegram.approvals import preview_parts, request_message
from tests.fakes.anthropic_server import text, tool_use
from tests.support.languages import EN
from tests.support.runtime_tools import Writer

TAIL = "; rm -rf ~/important"


def view(summary: str) -> ApprovalView:
    return ApprovalView("abcdefghijklmnop", "shell_run", "high", summary, "telegram:1", "1",
                        "telegram", {}, time.time() + 300)


def test_telegram_sends_a_long_preview_whole_before_the_buttons():
    summary = "echo " + "a" * 7000 + TAIL
    parts = preview_parts(view(summary), EN)
    assert len(parts) == 3 and all(len(p.plain) <= 4096 for p in parts)
    assert TAIL in parts[-1].plain
    assert "".join(p.plain.split(":\n", 1)[1] for p in parts) == summary
    assert "full preview is in the 3 messages above" in request_message(view(summary), EN).plain


def test_telegram_keeps_a_short_preview_in_the_request_itself():
    assert preview_parts(view("echo hi"), EN) == []
    assert "echo hi" in request_message(view("echo hi"), EN).plain


def test_discord_posts_every_character_of_a_long_preview():
    summary = "echo " + "b" * 3000 + TAIL
    chunks = discord_split(request_text(view(summary), EN))
    assert len(chunks) >= 2 and all(len(c) <= 2000 for c in chunks)
    assert TAIL in "".join(chunks)


async def test_a_preview_too_long_to_read_is_refused_not_asked(app_factory, fake_anthropic):
    class Verbose(Writer):
        async def dry_run(self, ctx, **args):
            return {"summary": "Write " + "c" * 13_000 + TAIL}

    app = await app_factory({"senders": {"telegram:1": "supervised"}})
    verbose = Verbose("verbose")
    app.services.registry.register(verbose, "tests")
    fake_anthropic.script(tool_use("verbose", {"note": "x"}), text("too long then"))
    sink = CollectingSink()
    await app.agent.handle(IncomingMessage("telegram:1", "1", "write it", "telegram"), sink)
    assert sink.of(ApprovalNeeded) == [] and verbose.executed == []
    result = fake_anthropic.requests[1].json["messages"][-1]["content"][0]
    assert result["is_error"] and "too large to show for approval" in result["content"]
