"""The Anthropic Messages API as the fake speaks it on the wire: no server, no event loop.

* Scripted replies: ``text``, ``tool_use``, ``reply``, ``error`` and ``from_spec`` (JSON specs).
* Request helpers: ``last_user_text``, ``tool_results`` and the 400s the real API answers with
  (``request_problem``, ``pairing_problem``).
* Token accounting: tokens ≈ len(canonical JSON)/4; ``PromptCache`` simulates prompt caching (see
  tests/fakes/anthropic_server.py for the rules).
* Response framing: the assistant message, error responses and SSE events of a streamed reply.

Import these from ``tests.fakes.anthropic_server``, which re-exports them.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


# ----------------------------------------------------------------------------- scripted replies

@dataclass(frozen=True)
class Block:
    """One content block of a reply: ``type`` is "text" or "tool_use"."""

    type: str
    text: str = ""
    name: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    id: str | None = None  # tool_use id; None → a fresh unique id each time it is served


@dataclass(frozen=True)
class Reply:
    blocks: tuple[Block, ...]
    delay: float = 0.0
    stop_reason: str | None = None  # None → "tool_use" if any tool_use block, else "end_turn"
    chunk_delay: float = 0.0  # pause between SSE deltas, to test partial streams and cancellation
    usage: dict[str, int] | None = None  # replaces the simulated usage numbers it names


@dataclass(frozen=True)
class ErrorReply:
    status: int
    type: str = "api_error"
    message: str = "fake error"
    headers: dict[str, str] | None = None
    delay: float = 0.0


def text(content: str, delay: float = 0.0) -> Reply:
    return Reply((Block("text", text=content),), delay=delay)


def tool_use(name: str, input: dict[str, Any], id: str | None = None, delay: float = 0.0) -> Reply:
    return Reply((Block("tool_use", name=name, input=dict(input), id=id),), delay=delay)


def reply(*parts: Reply | Block, delay: float = 0.0, stop_reason: str | None = None,
          chunk_delay: float = 0.0, usage: dict[str, int] | None = None) -> Reply:
    """Several blocks in one assistant message: ``reply(text("hm"), tool_use(...), tool_use(...))``.
    ``usage`` (API names: input_tokens, output_tokens, cache_creation_input_tokens,
    cache_read_input_tokens) replaces the simulated numbers it names."""
    blocks: list[Block] = []
    for part in parts:
        blocks.extend(part.blocks if isinstance(part, Reply) else (part,))
    return Reply(tuple(blocks), delay=delay, stop_reason=stop_reason, chunk_delay=chunk_delay,
                 usage=usage)


def error(status: int, type: str = "api_error", message: str = "fake error",
          headers: dict[str, str] | None = None, delay: float = 0.0) -> ErrorReply:
    return ErrorReply(status, type, message, headers, delay)


def from_spec(spec: str | dict[str, Any]) -> Reply | ErrorReply:
    """Build a reply from JSON: "hi" | {"text": ...} | {"tool_use": {"name", "input", "id"?}} |
    {"content": [{"type": "text", ...}, {"type": "tool_use", ...}]} | {"error": {"status", ...}},
    each dict optionally with "delay" (and "stop_reason" for content)."""
    if isinstance(spec, str):
        return text(spec)
    delay = float(spec.get("delay", 0.0))
    if "error" in spec:
        err = spec["error"]
        return error(int(err["status"]), err.get("type", "api_error"), err.get("message", "fake error"),
                     err.get("headers"), delay=delay)
    if "text" in spec:
        return text(str(spec["text"]), delay=delay)
    if "tool_use" in spec:
        call = spec["tool_use"]
        return tool_use(call["name"], call.get("input", {}), call.get("id"), delay=delay)
    if "content" in spec:
        blocks = [Block("text", text=b["text"]) if b["type"] == "text"
                  else Block("tool_use", name=b["name"], input=b.get("input", {}), id=b.get("id"))
                  for b in spec["content"]]
        return reply(*blocks, delay=delay, stop_reason=spec.get("stop_reason"))
    raise ValueError(f"unrecognised reply spec: {spec!r}")


# ----------------------------------------------------------------------------- request helpers

def _content_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def last_user_text(body: dict[str, Any]) -> str:
    """Text of the last message if it is the user's ("" when it only carries tool results)."""
    messages = body.get("messages") or []
    if not messages or messages[-1].get("role") != "user":
        return ""
    return "".join(b.get("text", "") for b in _content_blocks(messages[-1]) if b.get("type") == "text")


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of the last message (empty when the user just wrote text)."""
    messages = body.get("messages") or []
    if not messages or messages[-1].get("role") != "user":
        return []
    return [b for b in _content_blocks(messages[-1]) if b.get("type") == "tool_result"]


def pairing_problem(messages: list[dict[str, Any]]) -> str | None:
    """The real API's 400 when tool_use and tool_result blocks do not pair up, else None."""
    previous_ids: set[str] = set()
    for index, message in enumerate(messages):
        blocks = _content_blocks(message)
        if message.get("role") == "user":
            for j, block in enumerate(blocks):
                if block.get("type") == "tool_result" and block.get("tool_use_id") not in previous_ids:
                    return (f"messages.{index}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                            f"blocks: {block.get('tool_use_id')}. Each `tool_result` block must have a "
                            "corresponding `tool_use` block in the previous message.")
            previous_ids = set()
            continue
        previous_ids = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
        if previous_ids and index + 1 < len(messages):
            nxt = messages[index + 1]
            answered = {b.get("tool_use_id") for b in _content_blocks(nxt) if b.get("type") == "tool_result"}
            missing = sorted(i for i in previous_ids if i not in answered or nxt.get("role") != "user")
            if missing:
                return (f"messages.{index + 1}: `tool_use` ids were found without `tool_result` blocks "
                        f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                        "corresponding `tool_result` block in the next message.")
    return None


# The fields the real API accepts on a message and on each kind of content block; anything else
# is a 400 ("Extra inputs are not permitted"), e.g. bookkeeping the bot keeps in its history.
MESSAGE_FIELDS = frozenset({"role", "content"})
BLOCK_FIELDS = {
    "text": frozenset({"type", "text", "cache_control", "citations"}),
    "image": frozenset({"type", "source", "cache_control"}),
    "document": frozenset({"type", "source", "title", "context", "citations", "cache_control"}),
    "tool_use": frozenset({"type", "id", "name", "input", "cache_control"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error", "cache_control"}),
}


def extra_inputs(message: dict[str, Any], where: str) -> str | None:
    """The API's 400 for a field it does not know on a message or a content block."""
    for key in message:
        if key not in MESSAGE_FIELDS:
            return f"{where}.{key}: Extra inputs are not permitted"
    content = message["content"]
    for number, block in enumerate(content if isinstance(content, list) else []):
        allowed = BLOCK_FIELDS.get(block.get("type")) if isinstance(block, dict) else None
        for key in block if allowed is not None else ():
            if key not in allowed:
                return (f"{where}.content.{number}.{block['type']}.{key}: Extra inputs are "
                        "not permitted")
    return None


def request_problem(body: Any) -> str | None:
    """The real API's 400 for a malformed request body, else None."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    if not isinstance(body.get("model"), str):
        return "model: Field required"
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            return f"messages.{index}.role: Input should be 'user' or 'assistant'"
        if not isinstance(message.get("content"), str | list):
            return f"messages.{index}.content: Input should be a valid string or list"
        problem = extra_inputs(message, f"messages.{index}")
        if problem is not None:
            return problem
    if not isinstance(body.get("tools", []), list):
        return "tools: Input should be a valid list"
    if not isinstance(body.get("system", ""), str | list):
        return "system: Input should be a valid string or list"
    return None


# ----------------------------------------------------------------------------- token accounting

def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _prompt_units(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The prompt as (canonical text, carries cache_control) units, in cache order."""
    units: list[tuple[str, Any]] = [("tool", tool) for tool in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str):
        units.append(("system", system))
    elif isinstance(system, list):
        units.extend(("system", block) for block in system)
    for message in body.get("messages") or []:
        content = message.get("content")
        parts = [content] if isinstance(content, str) else list(content or [])
        units.extend((message.get("role", "?"), part) for part in parts)
    out = []
    for kind, unit in units:
        marked = isinstance(unit, dict) and unit.get("cache_control") is not None
        if isinstance(unit, dict):
            unit = {k: v for k, v in unit.items() if k != "cache_control"}
        out.append((canonical([kind, unit]), marked))
    return out


@dataclass
class PromptShape:
    total: int
    cacheable: int
    boundaries: list[tuple[bytes, int, bool]]  # (prefix hash, prefix tokens, breakpoint) per unit


def prompt_shape(body: dict[str, Any]) -> PromptShape:
    digest = hashlib.sha256(str(body.get("model")).encode())
    chars = 0
    boundaries: list[tuple[bytes, int, bool]] = []
    for unit, marked in _prompt_units(body):
        digest.update(unit.encode())
        digest.update(b"\x1e")
        chars += len(unit)
        boundaries.append((digest.copy().digest(), math.ceil(chars / 4), marked))
    marks = [tokens for _, tokens, marked in boundaries if marked]
    return PromptShape(math.ceil(chars / 4), marks[-1] if marks else 0, boundaries)


def output_tokens(content: list[dict[str, Any]]) -> int:
    return max(1, math.ceil(len(canonical(content)) / 4))


class PromptCache:
    """The prefixes seen at a cache breakpoint so far; one per fake server."""

    def __init__(self) -> None:
        self._seen: set[bytes] = set()

    def usage(self, body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        """The reply's usage numbers; remembers the request's breakpoints for the next one."""
        shape = prompt_shape(body)
        read = 0
        for digest, tokens, _ in shape.boundaries:
            if tokens > shape.cacheable:
                break
            if digest in self._seen:
                read = tokens
        self._seen.update(digest for digest, _, marked in shape.boundaries if marked)
        return {"input_tokens": shape.total - shape.cacheable, "output_tokens": output_tokens(content),
                "cache_creation_input_tokens": shape.cacheable - read, "cache_read_input_tokens": read}


# ----------------------------------------------------------------------------- response framing

def render_block(block: Block) -> dict[str, Any]:
    if block.type == "text":
        return {"type": "text", "text": block.text}
    return {"type": "tool_use", "id": block.id or f"toolu_fake_{uuid.uuid4().hex[:20]}",
            "name": block.name, "input": block.input}


def default_stop(content: list[dict[str, Any]]) -> str:
    return "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"


def assistant_message(model: str, content: list[dict[str, Any]], usage: dict[str, int],
                      stop_reason: str | None) -> dict[str, Any]:
    """The Messages API response body (also the final state a stream builds up)."""
    return {"id": f"msg_fake_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
            "model": model, "content": content, "stop_reason": stop_reason or default_stop(content),
            "stop_sequence": None, "usage": usage}


def request_id_header() -> dict[str, str]:
    return {"request-id": f"req_fake_{uuid.uuid4().hex[:24]}"}


def error_response(answer: ErrorReply) -> web.Response:
    headers = request_id_header()
    if answer.status in RETRYABLE_STATUSES:
        # retry-after: 0 alone makes the SDK fall back to its 0.5 s backoff; -ms makes retries instant.
        headers.update({"retry-after": "0", "retry-after-ms": "1"})
    headers.update(answer.headers or {})
    body = {"type": "error", "error": {"type": answer.type, "message": answer.message}}
    return web.json_response(body, status=answer.status, headers=headers)


def _split(value: str, parts: int) -> list[str]:
    size = max(1, math.ceil(len(value) / max(1, parts)))
    return [value[i:i + size] for i in range(0, len(value), size)] or [""]


def sse_events(message: dict[str, Any], chunks: int) -> Iterable[tuple[str, dict[str, Any]]]:
    """The streamed form of `message`: (event name, data) pairs, each block in `chunks` deltas."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in _split(block["text"], chunks)]
        else:
            opening = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": part}
                      for part in ["", *_split(canonical(block["input"]), chunks)]]
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}
        for delta in deltas:
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                            "usage": {"output_tokens": usage["output_tokens"]}}
    yield "message_stop", {"type": "message_stop"}


def wire_json(value: Any) -> str:
    """`value` as JSON the way an API sends it: UTF-8 as it is, except that a string which is
    not valid text (a lone surrogate a model may emit) goes out as `\\uXXXX` escapes, the only
    way JSON can carry it."""
    dumped = canonical(value)
    try:
        dumped.encode()
    except UnicodeEncodeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return dumped


def sse_frame(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {wire_json(data)}\n\n".encode()
