"""The model the crash tests talk to: a fake Anthropic responder that answers from the request
alone, so a restarted bot that resends a conversation gets the same answer.

A user message names what it wants with a verb and a token (`t7`):
- "say t7"  → the answer "ok t7";
- "do t7"   → a `shell_run` call appending "t7" to effects.log in the workspace (high risk: the
  full sender is asked), then, given its result, the answer "done t7: ran" (or "failed");
- "hang t7" → the same call, which then blocks reading the FIFO `t7.fifo` (a call cut off by
  the kill, mid-tool);
- "remind t7" → a `schedule` call creating the reminder "t7" (its message "reminder t7"), due
  a few seconds later (`REMIND_AFTER_S`, by the wall clock), then the answer "ok t7: set" (or,
  when the call failed or was denied, "done t7: not set");
- "job t7" → the same, a job "t7" whose run is a turn of its own: its prompt "chore t7" is
  answered "chore t7 finished".
Only the last verb of the last user message counts: a message merged into a later one is never
answered, so a test sees it as lost. Every tool result the model is shown (anywhere in the
history) is recorded, to check that what the model was told matches what happened.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tests.fakes.anthropic_server import Reply, reply, text, tool_use

EFFECTS = "effects.log"
VERB = re.compile(r"\b(say|do|hang|remind|job|chore) (t\d+)\b")
REMIND_AFTER_S = (3.0, 9.0)
COMMAND_TOKEN = re.compile(r"^echo (t\d+) >> ")


def command_for(verb: str, token: str) -> str:
    command = f"echo {token} >> {EFFECTS}"
    return f"{command}; cat {token}.fifo" if verb == "hang" else command


@dataclass(frozen=True)
class Shown:
    """One tool result as the model saw it."""

    token: str
    tool_use_id: str
    is_error: bool
    text: str


class ScriptedModel:
    """`fake.responder = ScriptedModel()`; `hold(token)` keeps the next model call asked about
    that token open (mid-model-call) until `release`; `hold(token, result=True)` the next call
    that brings its tool result."""

    def __init__(self) -> None:
        self.shown: list[Shown] = []
        self._holds: dict[str, asyncio.Event] = {}
        self.held: set[str] = set()       # hold keys whose call is being held right now

    def hold(self, token: str, result: bool = False) -> str:
        key = f"{token}:result" if result else token
        self._holds[key] = asyncio.Event()
        return key

    def release(self, key: str) -> None:
        gate = self._holds.pop(key, None)
        if gate is not None:
            gate.set()

    def release_all(self) -> None:
        for key in list(self._holds):
            self.release(key)

    async def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        self._record(messages)
        last = _blocks(messages[-1]) if messages else []
        results = [b for b in last if b.get("type") == "tool_result"]
        found = VERB.findall(" ".join(b.get("text", "") for b in last if b.get("type") == "text"))
        if not found and results:   # a new request in the same message goes first
            reminder = _reminder_of(messages, results[-1])
            if reminder:   # (not set: refused, denied, or cut off by a kill)
                return text(f"done {reminder}: not set" if results[-1].get("is_error")
                            else f"ok {reminder}: set")
            tokens = [self._token_of(messages, b) for b in results]
            await self._maybe_hold(f"{tokens[-1]}:result")
            outcome = "failed" if any(b.get("is_error") for b in results) else "ran"
            return text(f"done {' '.join(tokens)}: {outcome}")
        if not found:
            return text("ok")
        verb, token = found[-1]
        await self._maybe_hold(token)
        if verb == "say":
            return text(f"ok {token}")
        if verb == "chore":
            return text(f"chore {token} finished")
        if verb in ("remind", "job"):
            low, high = REMIND_AFTER_S   # the same for the same token: a re-asked turn agrees
            due = time.time() + low + int(token[1:]) % int(high - low + 1)
            what = {"message": f"reminder {token}"} if verb == "remind" else {
                "prompt": f"chore {token}"}
            return reply(text(f"setting {token}"), tool_use("schedule", {
                "action": "create", "name": token, **what,
                "at": datetime.fromtimestamp(due, UTC).isoformat(timespec="seconds")}))
        return reply(text(f"working on {token}"),
                     tool_use("shell_run", {"command": command_for(verb, token)}))

    async def _maybe_hold(self, key: str) -> None:
        gate = self._holds.get(key)
        if gate is None:
            return
        self.held.add(key)
        try:
            await gate.wait()
        finally:
            self.held.discard(key)
        self._holds.pop(key, None)   # once: the restarted bot's call goes through

    def _record(self, messages: list[dict[str, Any]]) -> None:
        """Every tool result in the history, once (a result shown again later is the same)."""
        seen = {(s.tool_use_id, s.text) for s in self.shown}
        for message in messages:
            for block in _blocks(message):
                if block.get("type") != "tool_result":
                    continue
                shown = Shown(self._token_of(messages, block), block.get("tool_use_id", ""),
                              bool(block.get("is_error")), _result_text(block))
                if (shown.tool_use_id, shown.text) not in seen:
                    seen.add((shown.tool_use_id, shown.text))
                    self.shown.append(shown)

    @staticmethod
    def _token_of(messages: list[dict[str, Any]], result: dict[str, Any]) -> str:
        """The token in the command of the call `result` answers ("?" for another call)."""
        for message in messages:
            for block in _blocks(message):
                if block.get("type") == "tool_use" and block.get("id") == result.get("tool_use_id"):
                    match = COMMAND_TOKEN.match(str(block.get("input", {}).get("command", "")))
                    return match.group(1) if match else "?"
        return "?"


def _reminder_of(messages: list[dict[str, Any]], result: dict[str, Any]) -> str:
    """The token of the reminder the schedule call `result` answers created ("" for another)."""
    for message in messages:
        for block in _blocks(message):
            if block.get("type") == "tool_use" and block.get("id") == result.get("tool_use_id") \
                    and block.get("name") == "schedule":
                return str(block.get("input", {}).get("name", ""))
    return ""


def asks_about(body: dict[str, Any]) -> str | None:
    """The token a model call is asked to act on (the last verb of its last user text)."""
    messages = body.get("messages") or []
    last = _blocks(messages[-1]) if messages and messages[-1].get("role") == "user" else []
    found = VERB.findall(" ".join(b.get("text", "") for b in last if b.get("type") == "text"))
    return found[-1][1] if found else None


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _result_text(result: dict[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
