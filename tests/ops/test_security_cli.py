"""The terminal channel shows control characters instead of obeying them.

What reaches the terminal (streamed model text, tool activity, an approval's summary) can carry
text a web page or a file chose; ESC sequences in it could erase the approval prompt's lines,
rewrite them, retitle the window or set the clipboard (OSC 52).
"""

from __future__ import annotations

import io

from bot.core.approval_cards import ApprovalView
from bot.core.events import Done, Notice, TextDelta, ToolProgress
from channels.cli import TerminalChannel
from tests.support.languages import EN

ERASE_AND_REWRITE = "rm -rf ~\x1b[2K\x1b[1A\r\x1b[32mls -la"
CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"


class OneApproval:
    """An agent stub: the approval is answered 'n' and refused here."""

    def __init__(self):
        self.answers = []

    async def resolve_approval(self, approval_id, resolver, choice):
        self.answers.append(choice)

        class Refused:
            ok, reason = False, "denied"
        return Refused()

    def resume_approval(self, resolution, sink):
        return False

    def translator(self, reader, hint=""):
        return EN


async def test_escape_sequences_are_shown_not_sent_to_the_terminal():
    out = io.StringIO()
    channel = TerminalChannel(OneApproval(), stdin=io.StringIO(""), stdout=out)
    sink = channel.sink
    await sink.emit(TextDelta("hello " + CLIPBOARD))
    await sink.emit(Done("", {}))
    await sink.emit(Notice("note \x9b31m"))
    await sink.emit(ToolProgress("c1", "web_fetch", "reading \x1b]0;owned\x07"))
    view = ApprovalView("A" * 16, "shell_run", "high", f"Run `{ERASE_AND_REWRITE}`", "cli:local",
                        "local", "cli", {}, 0.0)

    channel.lines.queue.put_nowait("n")   # the answer, as if typed on the pipe
    assert await channel._ask((view,))
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert "rm -rf ~\\x1b[2K\\x1b[1A\\r\\x1b[32mls -la" in text
    assert "hello " in text and "\n" in text
