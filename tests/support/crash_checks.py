"""The invariants every crash must keep, checked on what the fakes saw (no bot code involved):

- no message lost: every "say" is answered; every "do"/"hang" is answered or its call reported
  in its chat as in doubt (a message of its own, naming the command);
- no side effect twice: each token at most once in effects.log;
- the model is told the truth: a call shown to it as a success ran exactly once; a call that ran
  is never shown as one that did not (only as a success or as in doubt);
- anything in doubt is told: a call that ran without its success reaching the model, or one the
  model was told may have run, is reported in the chat, and the model is told so by the next
  turn there;
- approvals finish: no request message keeps its buttons once everything has settled;
- no reminder lost: every reminder in the store reached its chat (at least once: one cut off
  mid-send by a kill is sent again);
- no job run lost or repeated: every job in the store either finished its run in its chat or
  its owner was told what became of it (cut off by a restart, missed); its answer is sent at
  most twice (once more only when a kill came between sending it and recording that).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from tests.support.crash_model import Shown

# How the bot says a call may or may not have happened (to the user and to the model).
DOUBT = re.compile(r"may or may not|may have|might have|in doubt|not sure whether|"
                   r"unknown whether|did it complete", re.IGNORECASE)


@dataclass(frozen=True)
class Observed:
    sent: dict[str, tuple[int, int, str]]          # token -> (chat, message id, verb)
    messages: dict[tuple[int, int], dict[str, Any]]  # the bot's messages, as they look now
    effects: list[str]                               # effects.log, one token a line
    shown: list[Shown]                               # tool results as the model saw them
    requests: frozenset[tuple[int, int]] = frozenset()  # messages sent with approval buttons
    reminders: frozenset[tuple[str, int]] = frozenset()  # (job name, chat) of stored reminders
    jobs: frozenset[tuple[str, int]] = frozenset()       # ... and of the other stored jobs

    def answers(self, token: str) -> list[int]:
        """The bot's messages answering `token` (the model's final words about it)."""
        chat, sent_id, _ = self.sent[token]
        answer = re.compile(rf"\b(ok|done) {token}\b")
        return [mid for (c, mid), m in self.messages.items()
                if c == chat and mid > sent_id and answer.search(m.get("text", ""))]

    def answered(self, token: str) -> bool:
        return bool(self.answers(token))

    def reported(self, token: str) -> bool:
        """Told in its chat, apart from the request message, that its call may or may not have
        run (the report names the call: its command carries the token)."""
        chat, sent_id, verb = self.sent[token]
        named = re.compile(rf"\b{token}\b" if verb in ("remind", "job") else rf"echo {token} ")
        return any(c == chat and mid > sent_id and (c, mid) not in self.requests
                   and DOUBT.search(m.get("text", "")) and named.search(m.get("text", ""))
                   for (c, mid), m in self.messages.items())

    def reminded(self, name: str, chat: int) -> int:
        """How many times the reminder `name` was posted in `chat`."""
        return sum(1 for (c, _), m in self.messages.items() if c == chat
                   and m.get("text", "").startswith("⏰") and f"reminder {name}" in m["text"])

    def told_set(self, token: str) -> bool:
        """Was the user told the reminder or job `token` is set?"""
        return any(f"ok {token}: set" in m.get("text", "") for m in self.messages.values())

    def finished(self, name: str, chat: int) -> int:
        """How many times the run of the job `name` posted its answer in `chat`."""
        return sum(1 for (c, _), m in self.messages.items()
                   if c == chat and f"chore {name} finished" in m.get("text", ""))

    def job_reported(self, name: str, chat: int) -> bool:
        """Was the owner told what became of the job's run ("⏰ t7: the run was cut off…")?"""
        return any(c == chat and m.get("text", "").startswith(f"⏰ {name}:")
                   for (c, _), m in self.messages.items())

    def later_in_chat(self, token: str) -> bool:
        """Did the user write again in the token's chat (so the model saw its history since)?"""
        chat, sent_id, _ = self.sent[token]
        return any(c == chat and mid > sent_id for c, mid, _ in self.sent.values())

    def settled(self, token: str) -> bool:
        return self.answered(token) or (self.sent[token][2] != "say" and self.reported(token))

    def transcript(self) -> str:
        lines = []
        for chat in sorted({c for c, _, _ in self.sent.values()}):
            events = [(mid, f"user: {verb} {token}") for token, (c, mid, verb) in self.sent.items()
                      if c == chat]
            events += [(mid, f"bot{' [buttons]' if _buttons(m) else ''}: "
                             f"{' '.join(m.get('text', '').split())[:160]}")
                       for (c, mid), m in self.messages.items() if c == chat]
            lines.append(f"chat {chat}:")
            lines += [f"  {mid:4d} {line}" for mid, line in sorted(events)]
        lines.append(f"effects.log: {self.effects}")
        lines += [f"model shown {s.token} ({s.tool_use_id}): {'error' if s.is_error else 'ok'}: "
                  f"{s.text[:160]}" for s in self.shown]
        return "\n".join(lines)


def check_invariants(seen: Observed) -> list[str]:
    problems: list[str] = []
    counts = Counter(seen.effects)
    for token, (chat, _, verb) in sorted(seen.sent.items()):
        if not seen.settled(token):
            problems.append(f"{token} ({verb}, chat {chat}) was neither answered nor reported: lost")
        if counts[token] > 1:
            problems.append(f"{token}: its side effect ran {counts[token]} times")
        shown = [s for s in seen.shown if s.token == token]
        if any(not s.is_error for s in shown) and counts[token] != 1:
            problems.append(f"{token}: the model was told the call succeeded, but it ran "
                            f"{counts[token]} times")
        for s in shown:
            if s.is_error and counts[token] and not DOUBT.search(s.text):
                problems.append(f"{token}: the call ran, but the model was told otherwise: {s.text!r}")
        in_doubt = any(s.is_error and DOUBT.search(s.text) for s in shown) or (
            counts[token] and not any(not s.is_error for s in shown))
        if in_doubt and not seen.reported(token):
            problems.append(f"{token}: the call is in doubt, but the user was not told so")
        if in_doubt and seen.later_in_chat(token) and not any(
                s.is_error and DOUBT.search(s.text) for s in shown):
            problems.append(f"{token}: the call is in doubt, but the model was not told so "
                            "(by the next turn in its chat)")
        stored = seen.reminders if verb == "remind" else seen.jobs
        if verb in ("remind", "job") and seen.told_set(token) and (token, chat) not in stored:
            problems.append(f"{token}: the user was told the {verb} was set, but it is not stored")
    for name, chat in sorted(seen.reminders):
        if not seen.reminded(name, chat):
            problems.append(f"reminder {name} (chat {chat}) is in the store but never reached "
                            "its chat: lost")
    for name, chat in sorted(seen.jobs):
        finished = seen.finished(name, chat)
        if not finished and not seen.job_reported(name, chat):
            problems.append(f"job {name} (chat {chat}) is in the store but its run neither "
                            "finished nor was reported: lost")
        if finished > 2:
            problems.append(f"job {name} (chat {chat}): its run answered {finished} times")
    for (chat, mid), message in sorted(seen.messages.items()):
        if _buttons(message):
            problems.append(f"chat {chat}: request {mid} still has its buttons: "
                            f"{message.get('text', '')[:100]!r}")
    return problems


def _buttons(message: dict[str, Any]) -> bool:
    return any(str(button.get("callback_data", "")).startswith("ap:")
               for row in (message.get("reply_markup") or {}).get("inline_keyboard", [])
               for button in row)
