"""Any bytes in, valid text out, from the model: the fake model API (Anthropic and
OpenAI-compatible, each through its real SDK) streams answers and tool-call arguments holding
lone surrogates, sent as `\\ud800` escapes in the SSE JSON as a real API would. The person on
Telegram sees the answer repaired, the tool gets valid arguments, the next request carries valid
text, and both stores hold only valid text; nothing raises UnicodeEncodeError on the way."""

from __future__ import annotations

import random
from typing import Any

from bot.core.events import REPLACEMENT
from bot.core.tool import BaseTool, CallContext, ToolMeta
from bot.llm.client import ValidTextStream
from channels.telegram import TelegramChannel
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.telegram_server import channel_overrides
from tests.support.fuzz_text import fuzz_seed, invalid_strings, nasty_text, stored_text_is_valid
from tests.support.pg_support import on_both_backends
from tests.support.providers import on_both_providers
from tests.support.telegram_support import FAST

backend_name = on_both_backends()
provider_name = on_both_providers()

ADA = 4343


class NoteDown(BaseTool):
    """Keeps the arguments it was called with."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.meta = ToolMeta(
            name="note_down", description="Keeps a note.", risk="low",
            schema={"type": "object", "additionalProperties": False, "required": ["note"],
                    "properties": {"note": {"type": "string"}}},
            has_side_effects=False, returns_untrusted=False, supports_dry_run=True,
            capability_required="test:note")

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        self.calls.append(args)
        return {"kept": args["note"]}


def shown(tg) -> list[str]:
    """Every text the bot put on Telegram, sent or edited in place."""
    return [c.params["text"] for c in tg.calls if c.method in ("sendMessage", "editMessageText")
            and "text" in c.params]


async def test_lone_surrogates_in_the_models_answer_and_tool_arguments_arrive_repaired(
        app_factory, tg, fake_model):
    seed = fuzz_seed()
    rng = random.Random(seed)
    app = await app_factory({"senders": {f"telegram:{ADA}": "full"}, **channel_overrides(tg)},
                            env={"TELEGRAM_BOT_TOKEN": tg.token})
    note_down = NoteDown()
    app.services.registry.register(note_down, "tests")
    fake_model.script(reply(text("first " + nasty_text(rng)),
                            tool_use("note_down", {"note": nasty_text(rng)})),
                      text("final " + nasty_text(rng)))
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    try:
        tg.private_message(ADA, "note it down")
        await tg.wait_until(lambda: any(t.startswith("final x ") for t in shown(tg)), timeout=30)
        tg.private_message(ADA, "again")   # its request carries the repaired answer back
        await tg.wait_until(lambda: "ok: again" in shown(tg), timeout=30)
    finally:
        await channel.stop()
    failure = f"(FUZZ_SEED={seed})"
    assert len(fake_model.requests) == 3, failure
    assert all(not invalid_strings(r.json) for r in fake_model.requests), failure
    assert all(not invalid_strings(c.params) for c in tg.calls), failure
    final = [t for t in shown(tg) if t.startswith("final x ")]
    assert REPLACEMENT in final[-1], f"{failure} {final}"   # repaired, not dropped
    (args,) = note_down.calls
    assert not invalid_strings(args) and REPLACEMENT in args["note"], f"{failure} {args}"
    history = str(fake_model.requests[-1].json["messages"])
    assert "first x " + REPLACEMENT in history and "final x " + REPLACEMENT in history, failure
    assert await stored_text_is_valid(app.services.store) == [], failure


async def test_a_surrogate_pair_split_between_two_streamed_deltas_is_passed_on_joined():
    said: list[str] = []

    async def say(delta: str) -> None:
        said.append(delta)

    stream = ValidTextStream(say)
    for delta in ("smile \ud83d", "\ude00 and a lone \ud800"):
        await stream.send(delta)
    await stream.flush()
    assert said == ["smile ", "\U0001f600 and a lone ", REPLACEMENT]
