"""The OpenAI chat-completions API as the fake speaks it on the wire: no server, no event loop.

Replies are the same values the fake Anthropic scripts (``text``, ``tool_use``, ``reply``,
``error`` from tests/fakes/anthropic_wire.py), so one test can script either fake; plus
``printed_call`` (a tool call printed as JSON text, as many local models do) and ``raw_call``
(a call whose arguments are given as raw text, e.g. cut-off JSON).
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Iterable
from typing import Any

from aiohttp import web

from tests.fakes.anthropic_wire import (
    RETRYABLE_STATUSES,
    Block,
    ErrorReply,
    Reply,
    canonical,
    text,
    wire_json,
)


def printed_call(name: str, arguments: dict[str, Any], key: str = "arguments") -> Reply:
    """The whole answer is the call as JSON text: ``{"name": …, "arguments": {…}}``."""
    return text(json.dumps({"name": name, key: arguments}))


def raw_call(name: str, arguments: str) -> Reply:
    """A native tool call whose arguments string is sent exactly as given (broken JSON too)."""
    return Reply((Block("tool_use", name=name, text=arguments),))


# ----------------------------------------------------------------------------- requests

def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []


def last_user_text(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    if not messages or messages[-1].get("role") != "user":
        return ""
    return "".join(p.get("text", "") for p in _parts(messages[-1].get("content")) if p.get("type") == "text")


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The `tool` messages after the last assistant message."""
    out: list[dict[str, Any]] = []
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "assistant":
            break
        if message.get("role") == "tool":
            out.insert(0, message)
    return out


def request_problem(body: Any) -> str | None:
    """The 400s a real server answers: malformed body, `tool` messages without their call."""
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must contain at least one message"
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("system", "user", "assistant", "tool"):
            return f"messages[{index}].role: invalid role {role!r}"
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                return (f"messages[{index}]: messages with role 'tool' must be a response to a "
                        "preceeding message with 'tool_calls'.")
            open_calls.discard(message["tool_call_id"])
            continue
        if open_calls:
            return (f"messages[{index}]: an assistant message with 'tool_calls' must be followed "
                    f"by tool messages responding to each 'tool_call_id': {sorted(open_calls)}")
        if role == "assistant":
            open_calls = {c.get("id") for c in message.get("tool_calls") or ()}
    return None


# ----------------------------------------------------------------------------- answers

def prompt_tokens(body: dict[str, Any]) -> int:
    return max(1, math.ceil(len(canonical([body.get("messages"), body.get("tools")])) / 4))


def render(block: Block) -> dict[str, Any]:
    if block.type == "text":
        return {"type": "text", "text": block.text}
    arguments = block.text if block.text else canonical(block.input)
    return {"type": "tool_call", "id": block.id or f"call_fake_{uuid.uuid4().hex[:20]}",
            "name": block.name, "arguments": arguments}


def openai_usage(body: dict[str, Any], content: list[dict[str, Any]],
                 scripted: dict[str, int] | None) -> dict[str, Any]:
    """Usage in OpenAI's names; scripted numbers come in Anthropic's (the replies are shared):
    prompt = input + cache reads + cache writes, cached = cache reads."""
    completion = max(1, math.ceil(len(canonical(content)) / 4))
    prompt, cached = prompt_tokens(body), 0
    if scripted:
        cached = int(scripted.get("cache_read_input_tokens", 0))
        prompt = int(scripted.get("input_tokens", prompt)) + cached + int(
            scripted.get("cache_creation_input_tokens", 0))
        completion = int(scripted.get("output_tokens", completion))
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def finish_reason(content: list[dict[str, Any]], stop_reason: str | None) -> str:
    if stop_reason == "max_tokens":
        return "length"
    return "tool_calls" if any(b["type"] == "tool_call" for b in content) else "stop"


def completion(model: str, content: list[dict[str, Any]], usage: dict[str, Any] | None,
               stop_reason: str | None) -> dict[str, Any]:
    text_ = "".join(b["text"] for b in content if b["type"] == "text")
    calls = [{"id": b["id"], "type": "function",
              "function": {"name": b["name"], "arguments": b["arguments"]}}
             for b in content if b["type"] == "tool_call"]
    message: dict[str, Any] = {"role": "assistant", "content": text_ or None}
    if calls:
        message["tool_calls"] = calls
    body = {"id": f"chatcmpl-fake{uuid.uuid4().hex[:20]}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": finish_reason(content, stop_reason)}]}
    if usage is not None:
        body["usage"] = usage
    return body


def _split(value: str, parts: int) -> list[str]:
    size = max(1, math.ceil(len(value) / max(1, parts)))
    return [value[i:i + size] for i in range(0, len(value), size)] or [""]


def chunks(model: str, content: list[dict[str, Any]], usage: dict[str, Any] | None,
           stop_reason: str | None, pieces: int) -> Iterable[dict[str, Any]]:
    """The streamed form: role, text deltas, tool_calls deltas (id and name first, then
    argument pieces), the finish reason, then (when asked for) a usage chunk with no choices."""
    base = {"id": f"chatcmpl-fake{uuid.uuid4().hex[:20]}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    call_index = 0
    for block in content:
        if block["type"] == "text":
            for part in _split(block["text"], pieces):
                yield chunk({"content": part})
            continue
        yield chunk({"tool_calls": [{"index": call_index, "id": block["id"], "type": "function",
                                     "function": {"name": block["name"], "arguments": ""}}]})
        for part in _split(block["arguments"], pieces):
            yield chunk({"tool_calls": [{"index": call_index, "function": {"arguments": part}}]})
        call_index += 1
    yield chunk({}, finish_reason(content, stop_reason))
    if usage is not None:
        yield {**base, "choices": [], "usage": usage}


def sse_frame(data: dict[str, Any] | str) -> bytes:
    return f"data: {data if isinstance(data, str) else wire_json(data)}\n\n".encode()


ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error",
               403: "permission_denied", 404: "invalid_request_error", 429: "rate_limit_exceeded"}


def error_response(answer: ErrorReply) -> web.Response:
    headers = {"x-request-id": f"req_fake_{uuid.uuid4().hex[:24]}"}
    if answer.status in RETRYABLE_STATUSES:
        headers.update({"retry-after": "0", "retry-after-ms": "1"})
    headers.update(answer.headers or {})
    body = {"error": {"message": answer.message, "type": answer.type,
                      "code": answer.type if answer.status != 500 else None}}
    return web.json_response(body, status=answer.status, headers=headers)
