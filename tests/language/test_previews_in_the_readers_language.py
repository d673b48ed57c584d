"""A card frames what a tool shows in the reader's language and shows the tool's own content
exactly: an MCP tool's call (no preview: the server, its tool and every argument), a custom
tool's plain-text preview, a dry_run that answers fields without a summary. The real
dispatcher makes the preview; each channel's card renders it for its reader."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from bot.core.events import CollectingSink
from bot.core.tool import BaseTool, CallContext, ToolMeta
from bot.runtime.dispatch import Dispatcher, Turn
from bot.toolbox.mcp.tools import MCPTool
from channels.discord.approvals import request_text
from channels.slack import approvals as sl_cards
from channels.telegram import approvals as tg_cards
from channels.whatsapp import approvals as wa_cards
from tests.fakes.slack_server import visible_text
from tests.language.test_cards_in_every_language import slack_view, view, wa_view
from tests.support.languages import ES, IT, PSEUDO, unmarked_words

ARGS = {"to": "ana@example.com", "subject": "Acta", "body": "Adjunto el acta.\n¿Vale?"}
SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"},
                                           "body": {"type": "string"}}}


class NoServer:
    async def call(self, name: str, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        raise AssertionError("a preview never calls the server")


def mcp_tool() -> MCPTool:
    meta = ToolMeta(name="mail__send_mail", description="[MCP server mail] Sends mail.",
                    schema=SCHEMA, supports_dry_run=False, capability_required="mcp:mail")
    return MCPTool(meta, NoServer(), "sendMail", "mail")


class Newsletter(BaseTool):
    """A custom tool whose dry_run describes the call in its own (English) words."""

    meta = ToolMeta(name="newsletter", description="Sends the newsletter.", schema=SCHEMA,
                    supports_dry_run=True, risk="medium")

    async def dry_run(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        return {"summary": f"Send the newsletter to {args['to']}"}


def turn() -> Turn:
    return Turn("s", "telegram:1", "1", "full", sink=CollectingSink())


def cards(summary: str, tr) -> list[str]:
    """The request as Telegram, Discord, Slack and WhatsApp show it to the reader of `tr`."""
    return [tg_cards.request_message(dataclasses.replace(view(), summary=summary), tr).plain,
            request_text(dataclasses.replace(view(), summary=summary), tr),
            visible_text({"blocks": sl_cards.request_card(slack_view(summary=summary),
                                                          tr).blocks}),
            wa_cards.card_body(wa_view(summary=summary), tr)]


async def test_an_mcp_tools_card_in_spanish_frames_the_arguments_in_spanish_and_shows_them_exactly(
        services):
    summary = await Dispatcher(services).preview(turn(), mcp_tool(), ARGS, "t1")
    arguments = json.dumps(ARGS, ensure_ascii=False)
    assert str(summary) == ("No preview: the MCP server mail is asked to run its tool sendMail "
                            f"with these arguments:\n{arguments}")
    spanish = ("Sin vista previa: se pide al servidor MCP mail que ejecute su herramienta "
               f"sendMail con estos argumentos:\n{arguments}")
    assert ES.say(summary) == spanish
    for card in cards(summary, ES):
        assert "Sin vista previa: se pide al servidor MCP mail" in card
        assert "ana@example.com" in card and "Adjunto el acta." in card
    assert unmarked_words(PSEUDO.say(summary), ("mail", "sendMail", arguments)) == []


async def test_a_custom_tools_own_preview_is_shown_as_written_under_italian_words(services):
    summary = await Dispatcher(services).preview(turn(), Newsletter(), ARGS, "t1")
    own = "Send the newsletter to ana@example.com"
    assert IT.say(summary) == f"Cosa farà questa chiamata, secondo newsletter:\n{own}"
    for card in cards(summary, IT):
        assert "Cosa farà questa chiamata, secondo newsletter:" in card and own in card


async def test_a_dry_run_with_fields_and_no_summary_is_framed_in_the_readers_words(services):
    class Fields(Newsletter):
        async def dry_run(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
            return {"recipients": 1200}

    summary = await Dispatcher(services).preview(turn(), Fields(), ARGS, "t1")
    assert ES.say(summary) == 'Lo que hará esta llamada, según newsletter:\n{"recipients": 1200}'


async def test_a_custom_tool_without_a_preview_names_itself_above_its_arguments(services):
    class Blind(Newsletter):
        meta = dataclasses.replace(Newsletter.meta, supports_dry_run=False)

    summary = await Dispatcher(services).preview(turn(), Blind(), ARGS, "t1")
    arguments = json.dumps(ARGS, ensure_ascii=False)
    assert IT.say(summary) == ("Nessuna anteprima: newsletter viene chiamato con questi "
                               f"argomenti:\n{arguments}")
