"""How approval requests read on Discord: who asked, the preview shown exactly as written, and
the outcome label. Shared by the single request (channels/discord/approvals.py) and the batch
(channels/discord/batch.py)."""

from __future__ import annotations

import re

import discord

from bot.core.approval_cards import (
    ANSWER_LABELS,
    EXPIRED_LABEL,
    RISK_NAMES,
    SUPERSEDED,
    SUPERSEDED_LABEL,
    preview_text,
)
from bot.core.identity import Sender
from bot.language.translator import Translator


def discord_user_id(sender: str | None) -> int | None:
    """The Discord user id of a sender's text form, None for anyone else."""
    try:
        parsed = Sender.parse(sender or "")
    except ValueError:
        return None
    user = parsed.user_id
    ok = parsed.channel == "discord" and user.isascii() and user.isdigit() and len(user) <= 20
    return int(user) if ok else None


def mention(sender: str | None, tr: Translator) -> str:
    """A sender shown in a message: a Discord user as a (non-pinging) mention, others as text."""
    if not sender:
        return tr._("someone")
    user_id = discord_user_id(sender)
    return f"<@{user_id}>" if user_id is not None else discord.utils.escape_markdown(sender)


def literal_block(text: str) -> str:
    """`text` in a fenced code block that it cannot close: shown exactly as written.

    The summary holds text the model (or a web page it read) chose: a command, a path, a
    memory. As Markdown, `||…||` would hide part of it behind a spoiler, `[ok](url)` mask a
    link, `# ` or `-# ` resize it, and a backtick close the command's code span — so the person
    approving would not see what runs. A zero-width space after each backtick that another
    follows keeps any ``` inside from closing the block.
    """
    return "```\n" + re.sub(r"`(?=`)", "`\u200b", text) + "\n```"


def label_for(status: str | None, resolved_by: str | None, tr: Translator, *,
              always: bool = False) -> str:
    if status == "expired":
        return f"⌛ {tr._(SUPERSEDED_LABEL if resolved_by == SUPERSEDED else EXPIRED_LABEL)}"
    if status == "denied":
        return f"❌ {tr._(ANSWER_LABELS['deny'])}"
    return f"✅ {tr._(ANSWER_LABELS['always' if always else 'approve'])}"


def risk_text(risk: str, tr: Translator) -> str:
    name = RISK_NAMES.get(risk)
    return tr._(name) if name else risk


def summary_text(summary: str | None, tr: Translator) -> str:
    """A preview exactly as the tool wrote it; the placeholder of a tool without one in the
    reader's words."""
    return preview_text(summary, tr)
