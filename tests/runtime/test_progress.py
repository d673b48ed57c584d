"""A long tool's progress reaches the phone as edits of one status message."""

from __future__ import annotations

import asyncio
from typing import Any

from bot.core.tool import BaseTool, CallContext, ToolMeta
from channels.telegram import TelegramChannel
from tests.fakes.anthropic_server import text, tool_use
from tests.fakes.telegram_server import channel_overrides
from tests.support.telegram_support import FAST

ADA = 4242


class Scanner(BaseTool):
    """Reports progress three times; each step waits until the test has seen the previous one."""

    meta = ToolMeta(name="scanner", description="Scans files slowly.", risk="low",
                    schema={"type": "object", "properties": {}, "additionalProperties": False},
                    has_side_effects=False, returns_untrusted=False, capability_required="test:scan")

    def __init__(self) -> None:
        self.gates = [asyncio.Event() for _ in range(3)]

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        for step, gate in enumerate(self.gates, start=1):
            await ctx.progress(f"Scanning {step * 40} of 120 files…")
            await gate.wait()
        return {"files": 120}


def mentions(call, needle: str) -> bool:
    return needle in call.params.get("text", "")


async def test_progress_of_a_slow_tool_edits_one_status_message(app_factory, fake_anthropic, tg):
    app = await app_factory({"senders": {f"telegram:{ADA}": "full"}, **channel_overrides(tg)},
                            env={"TELEGRAM_BOT_TOKEN": tg.token})
    scanner = Scanner()
    app.services.registry.register(scanner, "tests")
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    try:
        fake_anthropic.script(tool_use("scanner", {}), text("Scanned 120 files."))
        tg.private_message(ADA, "scan everything")
        status_ids = set()
        for step, gate in enumerate(scanner.gates, start=1):
            needle = f"Scanning {step * 40} of 120"
            await tg.wait_until(lambda n=needle: any(
                mentions(c, n) for c in tg.calls
                if c.method in ("sendMessage", "editMessageText")), timeout=10)
            for call in tg.calls:
                if call.method in ("sendMessage", "editMessageText") and mentions(call, needle):
                    status_ids.add(call.result["message_id"])
            gate.set()
        await tg.wait_until(lambda: any("Scanned 120 files." in m.get("text", "")
                                        for m in tg.messages.values()), timeout=10)
    finally:
        await channel.stop()
    assert len(status_ids) == 1, f"progress went to several messages: {status_ids}"
    edits = [c for c in tg.calls if c.method == "editMessageText"
             and c.params.get("message_id") in status_ids]
    assert len(edits) >= 2
