"""An approval shows the whole call, on every channel, or the call is refused — never cut.

The person approving a tool without a preview of its own (an MCP or custom tool) used to see
`json.dumps(args)[:600]`: the recipient of a `send_email` could hide after character 600. These
tests run such a call through the real agent, the real channel libraries and the fakes of the
Telegram and Discord APIs, and look for every character in what was posted.
"""

from __future__ import annotations

import html
import json
import time
from typing import Any

import pytest

from bot.core.approval_cards import ApprovalNeeded, ApprovalView
from bot.core.events import CollectingSink, IncomingMessage
from bot.core.tool import BaseTool, CallContext, ToolMeta
from bot.runtime.dispatch import MAX_PREVIEW_CHARS, Dispatcher, Turn, visible_json
from channels import discord as discord_bot
from channels.discord.approvals import outcome_text
from channels.telegram import TelegramChannel
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.discord_server import FakeDiscord, FakeGuild
from tests.fakes.telegram_server import channel_overrides
from tests.support.languages import EN
from tests.support.telegram_support import FAST

HIDDEN = "attacker@evil.example"
ADA = 4242
ALICE, ALICE_DM = 4_200_000_000_000_001, 6_000_000_000_000_001
UNPREVIEWED = "No preview: send_email is called with these arguments:"
GUILD = FakeGuild(id=7_000_000_000_000_001, channel_ids=(7_000_000_000_000_011,))


class SendEmail(BaseTool):
    """Shaped like an MCP tool: a side effect and no preview of its own (so: high risk)."""

    def __init__(self, *, claims_dry_run: bool = False):
        self.meta = ToolMeta(
            name="send_email", description="Sends an email.", risk="high",
            schema={"type": "object", "additionalProperties": False,
                    "properties": {"to": {"type": "string"}, "subject": {"type": "string"},
                                   "body": {"type": "string"}},
                    "required": ["to", "subject", "body"]},
            has_side_effects=True, returns_untrusted=True, supports_dry_run=claims_dry_run,
            capability_required="mail:send")
        self.sent: list[dict[str, Any]] = []

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        self.sent.append(args)
        return {"sent": True}


def hiding_args(padding: int = 700) -> dict[str, str]:
    """A recipient list whose second address starts long after character 600."""
    return {"to": "friend@example.com," + " " * padding + HIDDEN, "subject": "Minutes",
            "body": "See attached."}


def turn() -> Turn:
    return Turn("s", "telegram:1", "1", "supervised", sink=CollectingSink())


# --- the preview text ------------------------------------------------------------------------


async def test_a_tool_without_preview_shows_every_argument(services):
    args = hiding_args()
    summary = await Dispatcher(services).preview(turn(), SendEmail(), args, "t1")
    assert summary == f"{UNPREVIEWED}\n{visible_json(args)}"
    assert summary.index(HIDDEN) > 600


async def test_a_tool_that_claims_a_preview_but_returns_none_shows_its_arguments(services):
    # BaseTool (and a custom tool without dry_run) answers {"summary": NO_PREVIEW}: that line
    # alone would hide every argument of the call.
    args = hiding_args()
    summary = await Dispatcher(services).preview(turn(), SendEmail(claims_dry_run=True), args, "t1")
    assert HIDDEN in summary and visible_json(args) in summary


async def test_a_dry_run_without_summary_is_shown_whole(services):
    class Chatty(SendEmail):
        async def dry_run(self, ctx, **args):
            return {"would_send_to": args["to"]}

    summary = await Dispatcher(services).preview(turn(), Chatty(claims_dry_run=True),
                                                 hiding_args(2000), "t1")
    assert HIDDEN in summary and len(summary) > 2000


async def test_a_long_diff_is_shown_whole_not_clipped(services, ctx):
    from tools import fs_edit

    (ctx.workspace / "list.txt").write_text("".join(f"line {i}\n" for i in range(400)))
    new = "".join(f"changed {i}\n" for i in range(300)) + HIDDEN + "\n"
    old = "".join(f"line {i}\n" for i in range(300))
    summary = await Dispatcher(services).preview(
        turn(), fs_edit.build(services.config), {"path": "list.txt", "old_text": old,
                                                 "new_text": new}, "t1")
    assert len(summary) > 1500 and "+" + HIDDEN in summary


async def test_characters_that_hide_text_are_shown_as_escapes(services):
    # A right-to-left override would display "…moc.live@rekcatta" and a zero-width space
    # nothing at all; escaped, the person approving sees that they are there.
    args = {"to": "friend@example.com\u202e\u200b" + HIDDEN, "subject": "s", "body": "b"}
    summary = await Dispatcher(services).preview(turn(), SendEmail(), args, "t1")
    assert "\u202e" not in summary and "\u200b" not in summary
    assert "\\u202e\\u200b" + HIDDEN in summary


async def test_a_call_too_long_to_show_is_refused_with_a_clear_message(app_factory, fake_anthropic):
    app = await app_factory({"senders": {"telegram:1": "full"}})
    tool = SendEmail()
    app.services.registry.register(tool, "tests")
    fake_anthropic.script(tool_use("send_email", hiding_args(MAX_PREVIEW_CHARS)), text("Too long."))
    sink = CollectingSink()
    await app.agent.handle(IncomingMessage("telegram:1", "1", "mail it", "telegram"), sink)
    assert sink.of(ApprovalNeeded) == [] and tool.sent == []
    result = fake_anthropic.requests[1].json["messages"][-1]["content"][0]
    assert result["is_error"]
    assert "too large to show for approval" in result["content"] and "It was not run" in result["content"]
    assert "Split the work into smaller calls" in result["content"]


# --- through the channels --------------------------------------------------------------------


@pytest.fixture
async def telegram_app(app_factory, tg):
    app = await app_factory({"senders": {f"telegram:{ADA}": "full"}, **channel_overrides(tg)},
                            env={"TELEGRAM_BOT_TOKEN": tg.token})
    tool = SendEmail()
    app.services.registry.register(tool, "tests")
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    yield app
    await channel.stop()


@pytest.mark.parametrize("padding", [700, 5000])
async def test_telegram_shows_every_character_of_the_call(telegram_app, tg, fake_anthropic, padding):
    args = hiding_args(padding)
    fake_anthropic.script(reply(text("Sending."), tool_use("send_email", args)))
    tg.private_message(ADA, "send the minutes")
    request = await tg.wait_for_card(lambda p: "inline_keyboard" in (p.get("reply_markup") or {}))
    sent = tg.of("sendMessage")   # the request goes out last, and is then given its buttons
    assert sent[-1].result["message_id"] == request.params["message_id"]
    posted = [html.unescape(c.params["text"]) for c in sent[:-1]]
    posted.append(html.unescape(request.params["text"]))
    previews = [p.split("\n", 1)[1].removeprefix("<pre>").removesuffix("</pre>")
                for p in posted if p.startswith("🔎 Preview")]
    shown = "".join(previews) if previews else posted[-1].split("<pre>", 1)[1].split("</pre>")[0]
    head, _, call = shown.partition("\n")
    assert head == UNPREVIEWED and json.loads(call) == args   # every character, recovered
    assert bool(previews) == (padding > 3000)   # a long one is split before the buttons


@pytest.fixture
async def discord_app(app_factory):
    async with FakeDiscord(guilds=(GUILD,)) as fake:
        with fake.patched():
            app = await app_factory({"senders": {f"discord:{ALICE}": "full"},
                                     "discord": {"guilds": [GUILD.id], "guild_ready_timeout": 0.05}},
                                    env={"DISCORD_BOT_TOKEN": fake.token})
            app.services.registry.register(SendEmail(), "tests")
            channel = discord_bot.create(app.config, app.agent)
            await channel.start()
            yield app, fake
            await channel.stop()


@pytest.mark.parametrize("padding", [700, 5000])
async def test_discord_shows_every_character_of_the_call(discord_app, fake_anthropic, padding):
    _, fake = discord_app
    args = hiding_args(padding)
    fake_anthropic.script(reply(text("Sending."), tool_use("send_email", args)))
    await fake.send_message(author_id=ALICE, content="send the minutes", channel_id=ALICE_DM)
    await fake.wait_for_buttons(ALICE_DM)
    posted = [m["content"] for m in fake.bot_messages(ALICE_DM)]
    assert posted[0] == "Sending."
    # The request is one fenced block, split across messages when long: remove the fences the
    # split added and every character of the call is there, in order.
    body = "".join(p.split("```\n", 1)[1].rsplit("\n```", 1)[0] for p in posted[1:])
    head, _, call = body.partition(UNPREVIEWED)   # a split may fall on the line's end
    assert head == "" and json.loads(call) == args   # every character, recovered
    assert all(len(p) <= 2000 for p in posted)
    assert (len(posted) > 2) == (padding > 2000)   # a long one is split across messages


def test_discord_says_how_much_of_a_long_preview_an_answered_request_leaves_out():
    summary = "x" * 3000 + HIDDEN
    view = ApprovalView("abcdefghijklmnop", "send_email", "high", summary, f"discord:{ALICE}", "1",
                        "discord", {}, time.time() + 60)
    shown = outcome_text(view, "✅ Approved", f"discord:{ALICE}", EN)
    assert HIDDEN not in shown and "1,521 more characters" in shown
    assert "the whole preview was posted with the request" in shown
