"""Turning the Messages API's raw stream events into a response, with text passed on as it
arrives.

The SDK's `messages.stream()` helper rebuilds a full snapshot of the message on every event;
with many chats at once that bookkeeping was the largest CPU cost of a turn, so the runtime
reads the raw events (`messages.create(stream=True)`) and keeps only what it needs here.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

TextCallback = Callable[[str], Awaitable[None]]


class StreamAccumulator:
    def __init__(self, on_text: TextCallback):
        self.on_text = on_text
        self.blocks: list[dict[str, Any]] = []
        self.json_parts: dict[int, list[str]] = {}
        self.model = ""
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] = {}

    async def feed(self, event: Any) -> None:
        kind = event.type
        if kind == "content_block_delta":
            await self._delta(event.index, event.delta)
        elif kind == "content_block_start":
            self._start(event.index, event.content_block)
        elif kind == "content_block_stop":
            self._stop(event.index)
        elif kind == "message_start":
            self.model = event.message.model
            self._merge_usage(event.message.usage)
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self._merge_usage(event.usage)

    async def _delta(self, index: int, delta: Any) -> None:
        block = self.blocks[index]
        kind = delta.type
        if kind == "text_delta":
            block["text"] += delta.text
            await self.on_text(delta.text)
        elif kind == "input_json_delta":
            self.json_parts.setdefault(index, []).append(delta.partial_json)
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.thinking
        elif kind == "signature_delta":
            block["signature"] = delta.signature

    def _start(self, index: int, content: Any) -> None:
        if content.type == "text":
            block: dict[str, Any] = {"type": "text", "text": content.text}
        elif content.type == "tool_use":
            block = {"type": "tool_use", "id": content.id, "name": content.name, "input": {}}
        else:
            block = content.model_dump(mode="json", exclude_none=True)
        while len(self.blocks) <= index:
            self.blocks.append({})
        self.blocks[index] = block

    def _stop(self, index: int) -> None:
        parts = self.json_parts.pop(index, None)
        if parts is None:
            return
        raw = "".join(parts)
        try:
            self.blocks[index]["input"] = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            # Kept visible so validation refuses it and the model is told its JSON was broken.
            self.blocks[index]["input"] = {"__unparsable_json__": raw[:2000]}

    def _merge_usage(self, usage: Any) -> None:
        if usage is None:
            return
        for key in ("input_tokens", "output_tokens", "cache_read_input_tokens",
                    "cache_creation_input_tokens"):
            value = getattr(usage, key, None)
            if value is not None:
                self.usage[key] = value
