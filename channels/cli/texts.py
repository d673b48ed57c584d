"""Every sentence the terminal channel shows a person, in one place: catalog message ids, shown
in the terminal's language (`/language`, else `LANG`) by `TerminalSink.say`. Model-facing text
is not here."""

from __future__ import annotations

from bot.language.catalogs import N_

PROMPT = N_("you> ")
CONTINUATION = "...  "      # the prompt of the second and later lines of one message
BOT = "myclaw> "
WELCOME = N_("myclaw — type a message, /help for commands, /attach FILE to send a file, "
             "Ctrl-D to quit.")
KEYS_HINT = N_("Alt-Enter (or Esc Enter) starts a new line; ↑/↓ go through what you sent before.")
BYE = N_("bye")
QUIT_HINT = N_("(press Ctrl-C again or Ctrl-D to quit)")
STOPPING = N_("(stopping — press Ctrl-C again or Ctrl-D to quit)")
STOPPED = N_("Stopped.")
DENIED_HERE = N_("(denied — press Ctrl-C again or Ctrl-D to quit)")
DENIED_ON_EXIT = N_("(denied {tools}: nobody left to answer)")
ERROR = N_("error: {message}")
TOOL_STARTED = N_("  · {tool} …")
TOOL_FAILED = N_("  · {tool} failed: {summary}")
TOOL_PROGRESS = N_("    {text}")
BUTTON = N_("  [{label}] → {command}")
FILE_OUT = N_("📎 {name} ({size:,} bytes, in the workspace){caption}")
VOICE_OUT = N_("🔊 voice reply ({seconds:.1f} s): {path}")
VOICE_NOT_SAVED = N_("🔊 voice reply not saved: {reason}")
TOO_LONG = N_("That message is {length:,} characters; the limit is {limit:,}. Nothing was "
              "sent: shorten it or split it into several messages.")

ATTACH_HELP = N_("Terminal only: /attach FILE [message] — send a photo, PDF, text/code file or "
                 "voice note (quote a path with spaces).")
ATTACH_BAD_QUOTES = N_("/attach: {error}")
ATTACH_UNREADABLE = N_("/attach: cannot read {path}: {reason}")
ATTACH_TOO_LARGE = N_("/attach: {path} is larger than {limit:,} bytes")

APPROVAL_ONE = N_("\nApproval needed — {tool} (risk {risk})\n{summary}")
APPROVAL_QUESTION = N_("Approve? [y]es / [N]o{always}: ")
APPROVAL_ALWAYS = N_(" / [a]lways: {scope}")
APPROVAL_BATCH_CALL = N_("{number}. {tool} (risk {risk}){always}\n{summary}")
APPROVAL_BATCH_ALWAYS = N_(" — [a]lways: {scope}")
APPROVAL_BATCH_QUESTION = N_("Approve? [a]ll / [D]eny all / a letter per call in order, "
                             "y, n or a (always): ")
CHOICES_ONE = N_("y (yes) or n (no)")
CHOICES_ONE_ALWAYS = N_("y (yes), n (no) or a (always)")
CHOICES_BATCH = N_("a (approve all), d (deny all) or one of y, n, a per call (e.g. {example!r})")
ASK_AGAIN = N_("Please answer {choices}, not {answer!r}: ")

# An approval answered away from this terminal (the console, an approver's phone, expiry).
OUTCOME = {"approve": N_("approved"), "always": N_("approved (always)"), "deny": N_("denied"),
           "expire": N_("expired — nobody answered in time")}
ANSWERED_ELSEWHERE = N_("(the request to run {tools} was {outcome} by {resolver})")
EXPIRED_ELSEWHERE = N_("(the request to run {tools} {outcome})")
