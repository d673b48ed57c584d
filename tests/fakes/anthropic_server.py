"""A fake Anthropic Messages API on 127.0.0.1, for tests and benchmarks.

The real ``anthropic`` SDK talks to it over HTTP, so the code under test runs its real paths::

    from tests.fakes.anthropic_server import FakeAnthropic, error, reply, text, tool_use

    async with FakeAnthropic() as fake:
        client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test", max_retries=0)
        fake.script(reply(text("let me look"), tool_use("read_file", {"path": "a.txt"})),
                    error(429, "rate_limit_error"), text("done"))
        ...                                  # replies are served FIFO, then `fake.responder` answers
        await fake.wait_for_requests(3)
        assert fake.last_request.json["messages"][-1]["role"] == "user"

* ``fake.responder = fn`` — ``fn(request_json) -> Reply | ErrorReply | str`` (may be async) answers
  once the script is empty; the default replies ``text("ok: <last user text>")``. An exception in
  it becomes a 500 (``x-should-retry: false``) and is re-raised when the ``async with`` block ends.
* ``fake.delay`` (seconds) is added to every reply's own ``delay=``; delays never block other
  requests. ``fake.unknown_models`` (set) → 404 ``not_found_error``. ``fake.strict`` (default on)
  rejects histories where ``tool_use``/``tool_result`` blocks do not pair up, as the real API does.
* Usage numbers simulate prompt caching: tokens ≈ len(canonical JSON)/4; the prefix (tools →
  system → messages) up to the last block carrying ``cache_control`` is cacheable; the longest part
  of it seen before at a breakpoint is ``cache_read``, the rest ``cache_creation``. No minimum
  cacheable length and no 20-block look-back limit are simulated.
* Out of process: ``python -m tests.fakes.anthropic_server [--port 0] [--delay S] [--script F]``
  prints ``READY http://127.0.0.1:PORT``; ``POST /_fake/script`` (a JSON list of specs, see
  ``from_spec``) queues replies and ``GET /_fake/requests`` lists what was received.
* Not async? ``with FakeAnthropic.start_in_thread() as handle:`` → ``handle.base_url``,
  ``handle.fake``, ``handle.wait_for_requests(n)``, ``handle.stop()``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import inspect
import json
import math
import signal
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
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
          chunk_delay: float = 0.0) -> Reply:
    """Several blocks in one assistant message: ``reply(text("hm"), tool_use(...), tool_use(...))``."""
    blocks: list[Block] = []
    for part in parts:
        blocks.extend(part.blocks if isinstance(part, Reply) else (part,))
    return Reply(tuple(blocks), delay=delay, stop_reason=stop_reason, chunk_delay=chunk_delay)


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


def echo_responder(body: dict[str, Any]) -> Reply:
    return text(f"ok: {last_user_text(body)}")


def tool_then_text_responder(body: dict[str, Any]) -> Reply:
    """One `time_now` call per user message, then a text answer (benchmarks use it)."""
    if tool_results(body):
        return text("done: the tool answered")
    return reply(text("checking"), tool_use("time_now", {}))


RESPONDERS = {"echo": echo_responder, "tool-then-text": tool_then_text_responder}


def _pairing_problem(messages: list[dict[str, Any]]) -> str | None:
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


def _request_problem(body: Any) -> str | None:
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
    if not isinstance(body.get("tools", []), list):
        return "tools: Input should be a valid list"
    if not isinstance(body.get("system", ""), str | list):
        return "system: Input should be a valid string or list"
    return None


# ----------------------------------------------------------------------------- token accounting

def _canonical(value: Any) -> str:
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
        out.append((_canonical([kind, unit]), marked))
    return out


@dataclass
class _PromptShape:
    total: int
    cacheable: int
    boundaries: list[tuple[bytes, int, bool]]  # (prefix hash, prefix tokens, breakpoint) per unit


def _prompt_shape(body: dict[str, Any]) -> _PromptShape:
    digest = hashlib.sha256(str(body.get("model")).encode())
    chars = 0
    boundaries: list[tuple[bytes, int, bool]] = []
    for unit, marked in _prompt_units(body):
        digest.update(unit.encode())
        digest.update(b"\x1e")
        chars += len(unit)
        boundaries.append((digest.copy().digest(), math.ceil(chars / 4), marked))
    marks = [tokens for _, tokens, marked in boundaries if marked]
    return _PromptShape(math.ceil(chars / 4), marks[-1] if marks else 0, boundaries)


def _output_tokens(content: list[dict[str, Any]]) -> int:
    return max(1, math.ceil(len(_canonical(content)) / 4))


# ----------------------------------------------------------------------------- the server

@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    json: Any
    time: float  # time.monotonic() at arrival
    usage: dict[str, int] | None = None  # what the fake answered with, once known
    aborted: bool = False  # the client went away mid-stream


class FakeAnthropic:
    """See the module docstring. One instance = one server = one prompt cache."""

    def __init__(self, *, delay: float = 0.0, port: int = 0, chunks: int = 3) -> None:
        self.delay = delay
        self.chunks = chunks  # deltas per streamed block
        self.responder: Callable[[dict[str, Any]], Any] = echo_responder
        self.unknown_models: set[str] = set()
        self.strict = True
        self.requests: list[RecordedRequest] = []
        self.responder_errors: list[BaseException] = []
        self.base_url = ""
        self._port = port
        self._queue: deque[Reply | ErrorReply] = deque()
        self._cache: set[bytes] = set()
        self._changed: asyncio.Condition | None = None  # notified on arrivals and aborted streams
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None

    # -- public API ------------------------------------------------------------------------------
    def script(self, *replies: Reply | ErrorReply) -> None:
        """Queue replies, served FIFO before the responder is consulted."""
        self._queue.extend(replies)

    @property
    def last_request(self) -> RecordedRequest:
        if not self.requests:
            raise AssertionError("the fake Anthropic API has received no request")
        return self.requests[-1]

    async def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Wait until at least n requests arrived; returns them all."""
        await self.wait_until(lambda: len(self.requests) >= n, timeout, f"{n} requests")
        return list(self.requests)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0,
                         what: str = "the condition") -> None:
        """Wait until predicate() holds; re-checked whenever a request arrives or a stream aborts.
        Works from any thread's event loop."""
        assert self._loop is not None and self._changed is not None, "the fake is not running"
        if asyncio.get_running_loop() is not self._loop:
            future = asyncio.run_coroutine_threadsafe(self.wait_until(predicate, timeout, what), self._loop)
            return await asyncio.wrap_future(future)
        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(predicate)
        except TimeoutError as exc:
            raise TimeoutError(f"waited {timeout}s for {what}; {len(self.requests)} requests so far") from exc
        return None

    def cached_fraction(self, request: RecordedRequest | dict[str, Any]) -> float:
        """Share of the request's prompt tokens inside the cacheable prefix (0.0 – 1.0)."""
        shape = _prompt_shape(request.json if isinstance(request, RecordedRequest) else request)
        return shape.cacheable / shape.total if shape.total else 0.0

    # -- lifecycle -------------------------------------------------------------------------------
    async def __aenter__(self) -> FakeAnthropic:
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Condition()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._handle_messages)
        app.router.add_post("/_fake/script", self._handle_script)
        app.router.add_get("/_fake/requests", self._handle_requests)
        # Pending (delayed) replies are cancelled promptly on shutdown.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        # A deep backlog: the benchmarks open hundreds of connections at once.
        await web.TCPSite(self._runner, "127.0.0.1", self._port, backlog=2048).start()
        host, port = self._runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}"
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if exc_type is None and self.responder_errors:
            raise RuntimeError("the fake's responder raised") from self.responder_errors[0]

    @classmethod
    def start_in_thread(cls, **kwargs: Any) -> ThreadedFake:
        """Run a fresh fake on its own event loop in a daemon thread (for synchronous code)."""
        return ThreadedFake(cls(**kwargs))

    # -- handlers --------------------------------------------------------------------------------
    async def _handle_messages(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in request.headers.items()}
        recorded = RecordedRequest(request.path, headers, body, time.monotonic())
        self.requests.append(recorded)
        await self._notify()
        answer = await self._choose(request, body)
        delay = self.delay + answer.delay
        if delay > 0:
            await asyncio.sleep(delay)  # simulated latency, not synchronisation
        if isinstance(answer, ErrorReply):
            return _error_response(answer)
        content = [_render_block(block) for block in answer.blocks]
        usage = self._usage(body, content)
        recorded.usage = usage
        message = {"id": f"msg_fake_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
                   "model": body["model"], "content": content,
                   "stop_reason": answer.stop_reason or _default_stop(content),
                   "stop_sequence": None, "usage": usage}
        if body.get("stream"):
            return await self._stream(request, recorded, message, answer.chunk_delay)
        return web.json_response(message, headers=_request_id_header())

    async def _choose(self, request: web.Request, body: Any) -> Reply | ErrorReply:
        """Validation errors first (they consume no scripted reply), then script, then responder."""
        if not request.headers.get("x-api-key") and not request.headers.get("authorization", "").startswith(
                "Bearer "):
            return error(401, "authentication_error", "x-api-key header is required")
        problem = _request_problem(body)
        if problem is None and self.strict:
            problem = _pairing_problem(body["messages"])
        if problem is not None:
            return error(400, "invalid_request_error", problem)
        if body["model"] in self.unknown_models:
            return error(404, "not_found_error", f"model: {body['model']}")
        if self._queue:
            return self._queue.popleft()
        try:
            answer = self.responder(body)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:  # surfaced again in __aexit__ with its traceback
            self.responder_errors.append(exc)
            return error(500, "api_error", f"fake responder raised {exc!r}", {"x-should-retry": "false"})
        return text(answer) if isinstance(answer, str) else answer

    def _usage(self, body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        shape = _prompt_shape(body)
        read = 0
        for digest, tokens, _ in shape.boundaries:
            if tokens > shape.cacheable:
                break
            if digest in self._cache:
                read = tokens
        self._cache.update(digest for digest, _, marked in shape.boundaries if marked)
        return {"input_tokens": shape.total - shape.cacheable, "output_tokens": _output_tokens(content),
                "cache_creation_input_tokens": shape.cacheable - read, "cache_read_input_tokens": read}

    async def _stream(self, request: web.Request, recorded: RecordedRequest, message: dict[str, Any],
                      chunk_delay: float) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache", **_request_id_header()})
        await response.prepare(request)
        try:
            for name, data in _sse_events(message, self.chunks):
                await response.write(f"event: {name}\ndata: {_canonical(data)}\n\n".encode())
                if chunk_delay and name == "content_block_delta":
                    await asyncio.sleep(chunk_delay)  # simulated generation time
            await response.write_eof()
        except ConnectionResetError:  # the client cancelled mid-stream: record it, nothing to answer
            recorded.aborted = True
            await self._notify()
        return response

    async def _notify(self) -> None:
        async with self._changed:  # type: ignore[union-attr]
            self._changed.notify_all()  # type: ignore[union-attr]

    async def _handle_script(self, request: web.Request) -> web.Response:
        try:
            specs = await request.json()
            self.script(*(from_spec(spec) for spec in specs))
        except (ValueError, KeyError, TypeError) as exc:
            return web.json_response({"error": f"bad script: {exc}"}, status=400)
        return web.json_response({"queued": len(self._queue)})

    async def _handle_requests(self, request: web.Request) -> web.Response:
        return web.json_response([{"path": r.path, "json": r.json, "time": r.time, "usage": r.usage,
                                   "aborted": r.aborted} for r in self.requests])


def _render_block(block: Block) -> dict[str, Any]:
    if block.type == "text":
        return {"type": "text", "text": block.text}
    return {"type": "tool_use", "id": block.id or f"toolu_fake_{uuid.uuid4().hex[:20]}",
            "name": block.name, "input": block.input}


def _default_stop(content: list[dict[str, Any]]) -> str:
    return "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"


def _request_id_header() -> dict[str, str]:
    return {"request-id": f"req_fake_{uuid.uuid4().hex[:24]}"}


def _error_response(answer: ErrorReply) -> web.Response:
    headers = _request_id_header()
    if answer.status in RETRYABLE_STATUSES:
        # retry-after: 0 alone makes the SDK fall back to its 0.5 s backoff; -ms makes retries instant.
        headers.update({"retry-after": "0", "retry-after-ms": "1"})
    headers.update(answer.headers or {})
    body = {"type": "error", "error": {"type": answer.type, "message": answer.message}}
    return web.json_response(body, status=answer.status, headers=headers)


def _split(value: str, parts: int) -> list[str]:
    size = max(1, math.ceil(len(value) / max(1, parts)))
    return [value[i:i + size] for i in range(0, len(value), size)] or [""]


def _sse_events(message: dict[str, Any], chunks: int) -> Iterable[tuple[str, dict[str, Any]]]:
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
                      for part in ["", *_split(_canonical(block["input"]), chunks)]]
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}
        for delta in deltas:
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                            "usage": {"output_tokens": usage["output_tokens"]}}
    yield "message_stop", {"type": "message_stop"}


# ----------------------------------------------------------------------------- thread and process runners

class ThreadedFake:
    """A FakeAnthropic serving from its own event loop in a daemon thread."""

    def __init__(self, fake: FakeAnthropic) -> None:
        self.fake = fake
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-anthropic", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(fake.__aenter__(), self._loop).result(timeout=10)
        self.base_url = fake.base_url

    def script(self, *replies: Reply | ErrorReply) -> None:
        self._loop.call_soon_threadsafe(self.fake.script, *replies)

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[RecordedRequest]:
        coro = self.fake.wait_for_requests(n, timeout)
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout + 1)

    def stop(self) -> None:
        if self._loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self.fake.__aexit__(None, None, None), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> ThreadedFake:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def load_script(path: Path) -> list[Reply | ErrorReply]:
    data = json.loads(path.read_text(encoding="utf-8"))
    specs = data["replies"] if isinstance(data, dict) else data
    return [from_spec(spec) for spec in specs]


async def _serve(args: argparse.Namespace) -> None:
    fake = FakeAnthropic(delay=args.delay, port=args.port)
    fake.responder = RESPONDERS[args.responder]
    if args.script:
        fake.script(*load_script(Path(args.script)))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with fake:
        print(f"READY {fake.base_url}", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake Anthropic Messages API on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = let the OS choose")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds added to every reply")
    parser.add_argument("--script", help="JSON file: a list of reply specs (see from_spec)")
    parser.add_argument("--responder", choices=sorted(RESPONDERS), default="echo",
                        help="how to answer once the script is empty (default echo)")
    asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
