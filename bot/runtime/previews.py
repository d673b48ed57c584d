"""What an approval card says about a call: the tool's preview, framed in the reader's words.

A built-in tool's dry_run summary is a Phrase (its words from the catalog, its content — a diff,
a command, a URL — as values). Anything else is shown exactly as the tool gave it, under a line
of the catalog's that says whose words they are: a custom tool's own text, structured fields
without a summary, or — for a tool that cannot preview a call (an MCP tool, a custom tool
without dry_run) — every argument of the call, naming the MCP server it goes to.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bot.core.tool import NO_PREVIEW, Tool
from bot.language.phrase import Phrase

# A longer preview cannot be approved: the call is refused. A preview is never cut (a cut end
# could hide a recipient or a command); channels split a long one across messages.
MAX_PREVIEW_CHARS = 12_000
_NAME_CHARS = 100

# Characters that show nothing (or reorder what follows) in a chat: written as \\uXXXX in a
# preview, so an argument cannot hide behind them. json.dumps already escapes C0 controls.
_INVISIBLE = re.compile("[\u007f-\u009f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
                        "\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff"
                        "\uffa0\ufff0-\ufffb\U000e0000-\U000e0fff]")


def visible(text: str) -> str:
    """`text` with every character that shows nothing written as its escape."""
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}" if ord(m.group()) < 0x10000
                          else f"\\U{ord(m.group()):08x}", text)


def visible_json(value: Any) -> str:
    """`value` as JSON in which every character is visible."""
    return visible(json.dumps(value, ensure_ascii=False, default=str))


def from_dry_run(tool: Tool, outcome: Any) -> str:
    """The preview a dry_run answered ("" when it has none: the arguments are shown instead)."""
    summary = outcome.get("summary") if isinstance(outcome, dict) else None
    if summary == NO_PREVIEW:
        return ""
    if not isinstance(summary, str) or not summary.strip():
        return own_words(tool, visible_json(outcome))
    if not isinstance(summary, Phrase):
        summary = own_words(tool, visible(summary))
    diff = outcome.get("diff")
    if isinstance(diff, str) and diff.strip():  # what an edit changes, not its size
        return Phrase("{summary}\n{diff}", summary=summary, diff=diff)
    return summary


def own_words(tool: Tool, preview: str) -> Phrase:
    """A preview that is not the catalog's words, shown as written under a line that says so."""
    return Phrase("What {tool} says this call will do:\n{preview}", tool=tool.meta.name,
                  preview=preview)


def without_preview(tool: Tool, args: Any) -> Phrase:
    """A call its tool cannot preview: every argument, and the MCP server it goes to."""
    arguments = visible_json(args)
    server, remote = getattr(tool, "mcp_server", None), getattr(tool, "remote_name", None)
    if isinstance(server, str) and server and isinstance(remote, str) and remote:
        return Phrase("No preview: the MCP server {server} is asked to run its tool {tool} with "
                      "these arguments:\n{arguments}", server=server,
                      tool=visible(remote)[:_NAME_CHARS], arguments=arguments)
    return Phrase("No preview: {tool} is called with these arguments:\n{arguments}",
                  tool=tool.meta.name, arguments=arguments)
