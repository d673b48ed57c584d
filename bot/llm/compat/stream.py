"""OpenAI chat-completion chunks (or one whole completion) as the runtime's content blocks.

Streamed `tool_calls` deltas arrive as pieces keyed by `index`: the first carries the call's id
and name, the rest bits of the JSON arguments to concatenate. They become `tool_use` blocks, so
validation, policy, previews and approvals run as for any other model. Arguments that do not
parse (a cut-off stream, a sloppy local model) are kept visible under `__unparsable_json__`, so
validation refuses them with `invalid_args` and the model is told, as on the Anthropic path.

Many local models print a tool call as JSON text instead. That is taken as a call only when the
whole answer is one JSON object naming an offered tool whose arguments pass its schema; anything
else is text. While an answer might still be such an object (it starts with `{` or a code
fence) its text is held back, so a call is never shown to the person as prose.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from bot.config.json_schema import validator
from bot.llm.compat.request import UNPARSABLE
from bot.llm.provider import TextCallback

ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")
MAYBE_CALL = ("{", "```")


class ChunkAccumulator:
    def __init__(self, on_text: TextCallback | None, tools: list[dict[str, Any]] | None):
        self.on_text = on_text
        self.tools = {t["name"]: t for t in tools or ()}
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.model = ""
        self.finish_reason: str | None = None
        self.usage: Any = None
        self._holding = bool(self.tools)   # undecided: might be a call printed as text
        self._held: list[str] = []

    async def feed(self, chunk: Any) -> None:
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        if chunk.model:
            self.model = chunk.model
        for choice in chunk.choices or ():
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    await self._text(delta.content)
                for call in delta.tool_calls or ():
                    self._call_piece(call)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason

    def whole(self, completion: Any) -> None:
        """A non-streamed completion."""
        self.model = completion.model or ""
        self.usage = completion.usage
        if completion.choices:
            choice = completion.choices[0]
            self.finish_reason = choice.finish_reason
            if choice.message.content:
                self.text.append(choice.message.content)
            for index, call in enumerate(choice.message.tool_calls or ()):
                self.calls[index] = {"id": call.id, "name": call.function.name,
                                     "arguments": [call.function.arguments or ""]}

    async def _text(self, piece: str) -> None:
        self.text.append(piece)
        if not self._holding:
            if self.on_text is not None:
                await self.on_text(piece)
            return
        self._held.append(piece)
        so_far = "".join(self._held).lstrip()
        if so_far and not any(so_far.startswith(p) or p.startswith(so_far) for p in MAYBE_CALL):
            await self._release()

    async def _release(self) -> None:
        self._holding = False
        held, self._held = "".join(self._held), []
        if held and self.on_text is not None:
            await self.on_text(held)

    def _call_piece(self, piece: Any) -> None:
        index = piece.index if piece.index is not None else len(self.calls)
        call = self.calls.setdefault(index, {"id": "", "name": "", "arguments": []})
        if piece.id:
            call["id"] = piece.id
        function = piece.function
        if function is not None:
            if function.name:
                call["name"] += function.name if call["name"] != function.name else ""
            if function.arguments:
                call["arguments"].append(function.arguments)

    async def blocks(self) -> tuple[list[dict[str, Any]], str]:
        """The content blocks and the stop reason in the runtime's terms."""
        text = "".join(self.text)
        if self.calls:
            await self._release()
            return self._with_calls(text), "tool_use"
        printed = printed_call(text, self.tools) if self.tools else None
        if printed is not None:
            return [printed], "tool_use"
        await self._release()
        stop = "max_tokens" if self.finish_reason == "length" else "end_turn"
        return ([{"type": "text", "text": text}] if text else []), stop

    def _with_calls(self, text: str) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for index in sorted(self.calls):
            call = self.calls[index]
            blocks.append({"type": "tool_use", "id": call["id"] or new_call_id(),
                           "name": call["name"], "input": parse_arguments("".join(call["arguments"]))})
        return blocks


def new_call_id() -> str:
    return f"call_{secrets.token_hex(12)}"


def parse_arguments(raw: str) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {UNPARSABLE: raw[:2000]}
    return value if isinstance(value, dict) else {UNPARSABLE: raw[:2000]}


def printed_call(text: str, tools: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """A `tool_use` block when the whole answer is one JSON call of an offered tool with valid
    arguments; None (it is text) otherwise."""
    body = _unfenced(text.strip())
    if not body.startswith("{"):
        return None
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    name = value.get("name") or value.get("tool")
    if isinstance(value.get("function"), dict):   # {"function": {"name", "arguments"}}
        value = value["function"]
        name = value.get("name")
    tool = tools.get(name) if isinstance(name, str) else None
    if tool is None:
        return None
    args = next((value[k] for k in ARGUMENT_KEYS if k in value), {})
    if isinstance(args, str):
        args = parse_arguments(args)
    if not isinstance(args, dict) or UNPARSABLE in args or not _valid(args, tool):
        return None
    return {"type": "tool_use", "id": new_call_id(), "name": name, "input": args}


def _unfenced(text: str) -> str:
    if text.startswith("```") and text.endswith("```") and text.count("```") == 2:
        inner = text[3:-3]
        first, _, rest = inner.partition("\n")
        return (rest if first.strip().isalpha() or not first.strip() else inner).strip()
    return text


# Compiled schemas by the identity of the schema dict: the catalog a turn offers is built once
# per registry generation, so its schemas are the same objects turn after turn. Each entry keeps
# its schema alive, so an id is never reused for another schema while it is here.
_COMPILED: dict[int, tuple[dict[str, Any], Any]] = {}
ANY_OBJECT: dict[str, Any] = {"type": "object"}


def _valid(args: dict[str, Any], tool: dict[str, Any]) -> bool:
    schema = tool.get("input_schema") or ANY_OBJECT
    held = _COMPILED.get(id(schema))
    if held is None or held[0] is not schema:
        if len(_COMPILED) > 256:
            _COMPILED.clear()
        held = _COMPILED[id(schema)] = (schema, validator(schema))
    return held[1].is_valid(args)
