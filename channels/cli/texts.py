"""Every sentence the terminal channel shows a person, in one place (for the translation
catalogs). Model-facing text is not here."""

from __future__ import annotations

PROMPT = "you> "
CONTINUATION = "...  "      # the prompt of the second and later lines of one message
BOT = "myclaw> "
WELCOME = ("myclaw — type a message, /help for commands, /attach FILE to send a file, "
           "Ctrl-D to quit.")
KEYS_HINT = "Alt-Enter (or Esc Enter) starts a new line; ↑/↓ go through what you sent before."
BYE = "bye"
QUIT_HINT = "(press Ctrl-C again or Ctrl-D to quit)"
STOPPING = "(stopping — press Ctrl-C again or Ctrl-D to quit)"
STOPPED = "Stopped."
DENIED_HERE = "(denied — press Ctrl-C again or Ctrl-D to quit)"
DENIED_ON_EXIT = "(denied {tools}: nobody left to answer)"
ERROR = "error: {message}"
TOOL_STARTED = "  · {tool} …"
TOOL_FAILED = "  · {tool} failed: {summary}"
TOOL_PROGRESS = "    {text}"
BUTTON = "  [{label}] → {command}"
FILE_OUT = "📎 {name} ({size:,} bytes, in the workspace){caption}"
VOICE_OUT = "🔊 voice reply ({seconds:.1f} s): {path}"
VOICE_NOT_SAVED = "🔊 voice reply not saved: {reason}"
TOO_LONG = ("That message is {length:,} characters; the limit is {limit:,}. Nothing was sent: "
            "shorten it or split it into several messages.")

ATTACH_HELP = ("Terminal only: /attach FILE [message] — send a photo, PDF, text/code file or voice "
               "note (quote a path with spaces).")
ATTACH_BAD_QUOTES = "/attach: {error}"
ATTACH_UNREADABLE = "/attach: cannot read {path}: {reason}"
ATTACH_TOO_LARGE = "/attach: {path} is larger than {limit:,} bytes"

APPROVAL_ONE = "\nApproval needed — {tool} (risk {risk})\n{summary}"
APPROVAL_QUESTION = "Approve? [y]es / [N]o{always}: "
APPROVAL_ALWAYS = " / [a]lways: {scope}"
APPROVAL_BATCH = "\nApproval needed — {count} calls:"
APPROVAL_BATCH_CALL = "{number}. {tool} (risk {risk}){always}\n{summary}"
APPROVAL_BATCH_ALWAYS = " — [a]lways: {scope}"
APPROVAL_BATCH_QUESTION = ("Approve? [a]ll / [D]eny all / a letter per call in order, "
                           "y, n or a (always): ")
CHOICES_ONE = "y (yes) or n (no)"
CHOICES_ONE_ALWAYS = "y (yes), n (no) or a (always)"
CHOICES_BATCH = "a (approve all), d (deny all) or one of y, n, a per call (e.g. {example!r})"
ASK_AGAIN = "Please answer {choices}, not {answer!r}: "

# An approval answered away from this terminal (the console, an approver's phone, expiry).
OUTCOME = {"approve": "approved", "always": "approved (always)", "deny": "denied",
           "expire": "expired — nobody answered in time"}
ANSWERED_ELSEWHERE = "(the request to run {tools} was {outcome} by {resolver})"
EXPIRED_ELSEWHERE = "(the request to run {tools} {outcome})"
