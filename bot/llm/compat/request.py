"""The runtime's request (the Messages API's shape) as an OpenAI chat-completions request.

system blocks → one `system` message; `tool_use` blocks → the assistant's `tool_calls`;
`tool_result` blocks → `tool` messages right after it; images → `image_url` data URLs; PDFs →
`file` parts (only reached when the model's capabilities say it reads PDFs; otherwise
bot/llm/degrade.py has turned them into text); tools → `function` tools. `cache_control`
markers are kept on text parts only where the route reads them (prompt_caching "explicit",
e.g. Anthropic models through OpenRouter); elsewhere a message of plain text is sent as a plain
string, which every local server understands. The conversion is a pure function of the request,
so a stable prefix stays stable.
"""

from __future__ import annotations

import json
from typing import Any

from bot.llm.capabilities import Capabilities

Block = dict[str, Any]
UNPARSABLE = "__unparsable_json__"
IMAGE_IN_RESULT = "[the tool returned an image, which this model cannot be shown here]"


def chat_request(params: dict[str, Any], caps: Capabilities, *,
                 completion_tokens_key: str = "max_tokens") -> dict[str, Any]:
    explicit = caps.prompt_caching == "explicit"
    messages: list[Block] = []
    system = _system(params.get("system"), explicit)
    if system is not None:
        messages.append(system)
    for message in params["messages"]:
        messages.extend(_message(message, explicit))
    request: dict[str, Any] = {"model": params["model"], "messages": messages,
                               completion_tokens_key: params["max_tokens"]}
    tools = params.get("tools")
    if tools and caps.tools:
        request["tools"] = [{"type": "function", "function": {
            "name": t["name"], "description": t.get("description", ""),
            "parameters": t.get("input_schema") or {"type": "object"}}} for t in tools]
        if not caps.parallel_tool_calls:
            request["parallel_tool_calls"] = False
    for key in ("temperature", "top_p", "stop_sequences"):
        if key in params:
            request["stop" if key == "stop_sequences" else key] = params[key]
    return request


def _system(system: Any, explicit: bool) -> Block | None:
    if not system:
        return None
    if isinstance(system, str):
        return {"role": "system", "content": system}
    parts = [_text_part(b, explicit) for b in system if b.get("type") == "text"]
    return {"role": "system", "content": _content(parts, explicit)}


def _text_part(block: Block, explicit: bool) -> Block:
    part = {"type": "text", "text": block.get("text", "")}
    if explicit and "cache_control" in block:
        part["cache_control"] = block["cache_control"]
    return part


def _content(parts: list[Block], explicit: bool) -> str | list[Block]:
    """Plain text as a string where nothing needs the list form (most compatible)."""
    if all(p["type"] == "text" and "cache_control" not in p for p in parts):
        return "\n\n".join(p["text"] for p in parts)
    return parts


def _message(message: Block, explicit: bool) -> list[Block]:
    content = message["content"]
    if isinstance(content, str):
        return [{"role": message["role"], "content": content}]
    if message["role"] == "assistant":
        return [_assistant(content)]
    out: list[Block] = []
    parts: list[Block] = []
    for block in content:
        kind = block.get("type")
        if kind == "tool_result":
            out.append({"role": "tool", "tool_call_id": block.get("tool_use_id", ""),
                        "content": _result_text(block.get("content"))})
        elif kind == "text":
            parts.append(_text_part(block, explicit))
        elif kind == "image":
            source = block.get("source", {})
            parts.append({"type": "image_url", "image_url": {
                "url": f"data:{source.get('media_type', 'image/png')};base64,"
                       f"{source.get('data', '')}"}})
        elif kind == "document":
            source = block.get("source", {})
            parts.append({"type": "file", "file": {
                "filename": block.get("title") or "document.pdf",
                "file_data": f"data:application/pdf;base64,{source.get('data', '')}"}})
    if parts:
        out.append({"role": "user", "content": _content(parts, explicit)})
    return out


def _assistant(content: list[Block]) -> Block:
    text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
    calls = [{"id": b["id"], "type": "function", "function": {
        "name": b.get("name", ""), "arguments": _arguments(b.get("input"))}}
        for b in content if b.get("type") == "tool_use"]
    message: Block = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return message


def _arguments(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {UNPARSABLE}:
        return str(value[UNPARSABLE])   # what the model sent, so it sees its own mistake
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    pieces = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            pieces.append(block.get("text", ""))
        elif isinstance(block, dict) and block.get("type") == "image":
            pieces.append(IMAGE_IN_RESULT)
    return "\n".join(pieces)
