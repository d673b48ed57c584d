"""What a job's run came to, in words: the details the runner records (`Jobs.finish` keeps
"ok: answered" or "failed: over the owner's budget", in English, for the audit) and how a
person reads them, in their language. Any other detail (an error's text, where the chat could
not be reached) is shown as it is."""

from __future__ import annotations

import re

from bot.language.catalogs import N_
from bot.language.phrase import Phrase

ANSWERED = N_("answered")
REMINDER_SENT = N_("reminder sent")
WAITING = N_("waiting for approval")
OVER_BUDGET = N_("over the owner's budget")
NO_ACCESS = N_("owner has no access")
UNREACHABLE = N_("chat {chat} cannot be reached on {channel}")
_KNOWN = frozenset({ANSWERED, REMINDER_SENT, WAITING, OVER_BUDGET, NO_ACCESS})
_UNREACHABLE = re.compile(r"chat (?P<chat>\S+) cannot be reached on (?P<channel>\w+)")


def outcome_words(outcome: str) -> str:
    """A recorded outcome ("ok: answered", "failed: …") as a Phrase; anything else as it is."""
    state, _, detail = outcome.partition(": ")
    if state not in ("ok", "failed"):
        return outcome
    unreachable = _UNREACHABLE.fullmatch(detail)
    value = (Phrase(detail) if detail in _KNOWN else
             Phrase(UNREACHABLE, **unreachable.groupdict()) if unreachable else detail)
    if state == "ok":
        return Phrase("ok: {detail}", detail=value) if detail else Phrase("ok")
    return Phrase("failed: {detail}", detail=value) if detail else Phrase("failed")
