"""Command buttons under a notice (/jobs Cancel, Resume): a tap sends the button's command as a
message from whoever tapped, so it passes every check typing it would — a forged tap can do
nothing its sender could not type. Callback data is "c:<command>" (Telegram allows 64 bytes).
"""

from __future__ import annotations

from collections.abc import Sequence

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.core.events import Button
from bot.language.translator import Translator

PREFIX = "c:"
PATTERN = r"^c:/"
MAX_CALLBACK_BYTES = 64
MAX_LABEL_CHARS = 40


def keyboard(buttons: Sequence[Button], tr: Translator) -> InlineKeyboardMarkup | None:
    """One button per row, labelled in the reader's language (the command it sends is the
    same in every language); a command too long for callback data is left out (the notice
    text names every command anyway)."""
    rows = [[InlineKeyboardButton(tr.say(b.label)[:MAX_LABEL_CHARS],
                                  callback_data=PREFIX + b.command)]
            for b in buttons if len((PREFIX + b.command).encode()) <= MAX_CALLBACK_BYTES]
    return InlineKeyboardMarkup(rows) if rows else None


def command_of(data: str | None) -> str | None:
    """The command a tap carries, or None when the data is not a command button's."""
    if not data or not data.startswith(PREFIX + "/") or len(data.encode()) > MAX_CALLBACK_BYTES:
        return None
    command = data[len(PREFIX):]
    return command if command.isprintable() else None
