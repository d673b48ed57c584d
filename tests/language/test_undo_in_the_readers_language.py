"""/undo answers in the reader's language: what was undone, that nothing is left to undo, and
why a change cannot be undone — the tool's name and what it changed shown as they are. The real
App and python-telegram-bot against the fake Bot API and the fake Anthropic API."""

from __future__ import annotations

from typing import Any

from bot.approvals.undo import UndoLog
from bot.core.tool import BaseTool, CallContext, ToolMeta, UnrevertibleError
from bot.language.catalogs import catalogs
from bot.language.phrase import Phrase
from channels.telegram import TelegramChannel
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.telegram_server import channel_overrides
from tests.language.test_walkthrough_in_italian import said_to
from tests.support.telegram_support import FAST

GIULIA = 4242


async def test_an_italian_persons_undo_is_answered_in_italian(app_factory, tg, fake_anthropic):
    tg.language_codes[GIULIA] = "it"
    app = await app_factory({"senders": {f"telegram:{GIULIA}": "full"}, **channel_overrides(tg)},
                            env={"TELEGRAM_BOT_TOKEN": tg.token})
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    fake_anthropic.script(reply(tool_use("fs_write", {"path": "nota.txt", "content": "latte\n"})),
                          text("Scritto."))
    try:
        tg.private_message(GIULIA, "scrivi latte in nota.txt")
        await tg.wait_until(lambda: "Scritto." in said_to(tg, GIULIA))
        for _ in range(2):
            before = len(said_to(tg, GIULIA))
            tg.private_message(GIULIA, "/undo")
            await tg.wait_until(lambda before=before: len(said_to(tg, GIULIA)) > before)
    finally:
        await channel.stop()
    shown = said_to(tg, GIULIA)[-2:]
    assert not (app.config.workspace / "nota.txt").exists()
    assert "Annullato: fs_write nota.txt." in shown
    assert "Niente da annullare in questa conversazione." in shown


class MailSend(BaseTool):
    meta = ToolMeta(name="mail_send", description="send a mail",
                    schema={"type": "object", "properties": {}}, supports_dry_run=True)

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        return {"sent": True}

    async def revert(self, ctx: CallContext, args: dict[str, Any], result: dict[str, Any]) -> dict:
        raise UnrevertibleError(Phrase("the tool is no longer available."))


async def test_why_a_change_cannot_be_undone_is_said_in_spanish(store, services, ctx):
    undo = UndoLog(store)
    services.registry.register(MailSend(), "tests")
    async with store.transaction() as tx:
        await undo.record(tx, session_id=ctx.session_id, sender=str(ctx.sender), tool="mail_send",
                          args={}, result={"sent": True})
    answer = await undo.undo_last(ctx.session_id, services.registry, ctx)
    assert answer == "mail_send cannot be undone: the tool is no longer available."
    assert catalogs().translator("es").say(answer) == \
        "mail_send no se puede deshacer: la herramienta ya no está disponible."
