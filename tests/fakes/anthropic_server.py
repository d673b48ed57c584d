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
* Usage numbers simulate prompt caching (``reply(..., usage={...})`` sets them by hand):
  tokens ≈ len(canonical JSON)/4; the prefix (tools →
  system → messages) up to the last block carrying ``cache_control`` is cacheable; the longest part
  of it seen before at a breakpoint is ``cache_read``, the rest ``cache_creation``. No minimum
  cacheable length and no 20-block look-back limit are simulated.
* Out of process: ``python -m tests.fakes.anthropic_server [--port 0] [--delay S] [--script F]``
  prints ``READY http://127.0.0.1:PORT``; ``POST /_fake/script`` (a JSON list of specs, see
  ``from_spec``) queues replies and ``GET /_fake/requests`` lists what was received.
* Not async? ``with FakeAnthropic.start_in_thread() as handle:`` → ``handle.base_url``,
  ``handle.fake``, ``handle.wait_for_requests(n)``, ``handle.stop()``.
* The wire format (reply builders, request checks, token accounting, SSE framing) lives in
  tests/fakes/anthropic_wire.py; the names tests use are re-exported here.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.fakes import EVENTUALLY
from tests.fakes.anthropic_wire import (
    RETRYABLE_STATUSES,
    Block,
    ErrorReply,
    PromptCache,
    Reply,
    assistant_message,
    error,
    error_response,
    from_spec,
    last_user_text,
    pairing_problem,
    prompt_shape,
    render_block,
    reply,
    request_id_header,
    request_problem,
    sse_events,
    sse_frame,
    text,
    tool_results,
    tool_use,
)

# The wire-level names (replies, request helpers) stay importable from here, as tests expect.
__all__ = [
    "RESPONDERS",
    "RETRYABLE_STATUSES",
    "Block",
    "ErrorReply",
    "FakeAnthropic",
    "RecordedRequest",
    "Reply",
    "ThreadedFake",
    "echo_responder",
    "error",
    "from_spec",
    "last_user_text",
    "load_script",
    "main",
    "reply",
    "text",
    "tool_results",
    "tool_then_text_responder",
    "tool_use",
]


# ----------------------------------------------------------------------------- default responders

def echo_responder(body: dict[str, Any]) -> Reply:
    return text(f"ok: {last_user_text(body)}")


def tool_then_text_responder(body: dict[str, Any]) -> Reply:
    """One `time_now` call per user message, then a text answer (benchmarks use it)."""
    if tool_results(body):
        return text("done: the tool answered")
    return reply(text("checking"), tool_use("time_now", {}))


RESPONDERS = {"echo": echo_responder, "tool-then-text": tool_then_text_responder}


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
        self._prompt_cache = PromptCache()
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

    async def wait_for_requests(self, n: int, timeout: float = EVENTUALLY) -> list[RecordedRequest]:
        """Wait until at least n requests arrived; returns them all."""
        await self.wait_until(lambda: len(self.requests) >= n, timeout, f"{n} requests")
        return list(self.requests)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = EVENTUALLY,
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
        shape = prompt_shape(request.json if isinstance(request, RecordedRequest) else request)
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
        arrived = time.monotonic()   # once the body is in; parsing it is the fake's own time
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in request.headers.items()}
        recorded = RecordedRequest(request.path, headers, body, arrived)
        self.requests.append(recorded)
        await self._notify()
        answer = await self._choose(request, body)
        delay = self.delay + answer.delay
        if delay > 0:
            await asyncio.sleep(delay)  # simulated latency, not synchronisation
        if isinstance(answer, ErrorReply):
            return error_response(answer)
        content = [render_block(block) for block in answer.blocks]
        usage = {**self._prompt_cache.usage(body, content), **(answer.usage or {})}
        recorded.usage = usage
        message = assistant_message(body["model"], content, usage, answer.stop_reason)
        if body.get("stream"):
            return await self._stream(request, recorded, message, answer.chunk_delay)
        return web.json_response(message, headers=request_id_header())

    async def _choose(self, request: web.Request, body: Any) -> Reply | ErrorReply:
        """Validation errors first (they consume no scripted reply), then script, then responder."""
        if not request.headers.get("x-api-key") and not request.headers.get("authorization", "").startswith(
                "Bearer "):
            return error(401, "authentication_error", "x-api-key header is required")
        problem = request_problem(body)
        if problem is None and self.strict:
            problem = pairing_problem(body["messages"])
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

    async def _stream(self, request: web.Request, recorded: RecordedRequest, message: dict[str, Any],
                      chunk_delay: float) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache", **request_id_header()})
        await response.prepare(request)
        try:
            for name, data in sse_events(message, self.chunks):
                await response.write(sse_frame(name, data))
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

    def wait_for_requests(self, n: int, timeout: float = EVENTUALLY) -> list[RecordedRequest]:
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
