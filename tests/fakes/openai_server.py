"""A fake OpenAI-compatible chat-completions API on 127.0.0.1, for tests and benchmarks.

The same public API as tests/fakes/anthropic_server.py, so a test can run against either (see
the `provider_name` fixture in tests/conftest.py)::

    from tests.fakes.openai_server import FakeOpenAI, error, printed_call, reply, text, tool_use

    async with FakeOpenAI() as fake:
        client = openai.AsyncOpenAI(base_url=fake.base_url + "/v1", api_key="test", max_retries=0)
        fake.script(reply(text("let me look"), tool_use("read_file", {"path": "a.txt"})),
                    error(429, "rate_limit_exceeded"), text("done"))

* Replies are the fake Anthropic's values (`text`, `tool_use`, `reply`, `error`), served FIFO,
  then `fake.responder(request_json)` answers (default: ``text("ok: <last user text>")``).
  `printed_call(name, args)` answers with the call printed as JSON text; `raw_call(name, s)`
  sends a native call whose arguments string is `s` exactly (cut-off JSON, say).
* Streaming (`"stream": true`) answers with `data: {chunk}` frames and `data: [DONE]`: text as
  `delta.content`, calls as `delta.tool_calls` (id and name, then argument pieces); with
  `stream_options.include_usage` a last chunk carries `usage` and no choices — unless
  `fake.send_usage = False`, as Ollama and some proxies do.
* `fake.delay`, a reply's `delay=` and `chunk_delay=` (a slow stream) as in the Anthropic fake;
  `fake.unknown_models` → 404 `model_not_found`; `fake.strict` → 400 when `tool` messages do not
  answer the assistant's `tool_calls`. Scripted `usage=` uses Anthropic's names (shared replies).
* `fake.requests[i].json` is the request as received; `fake.results_of(request)` lists its
  tool results as (tool_call_id, content) pairs.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.fakes import EVENTUALLY
from tests.fakes.anthropic_server import RecordedRequest
from tests.fakes.anthropic_wire import ErrorReply, Reply, error, reply, text, tool_use
from tests.fakes.openai_wire import (
    chunks,
    completion,
    error_response,
    last_user_text,
    openai_usage,
    printed_call,
    raw_call,
    render,
    request_problem,
    sse_frame,
    tool_results,
)

__all__ = ["FakeOpenAI", "error", "printed_call", "raw_call", "reply", "text", "tool_use"]


def echo_responder(body: dict[str, Any]) -> Reply:
    return text(f"ok: {last_user_text(body)}")


def tool_then_text_responder(body: dict[str, Any]) -> Reply:
    """One `time_now` call per user message, then a text answer (benchmarks use it)."""
    if tool_results(body):
        return text("done: the tool answered")
    return reply(text("checking"), tool_use("time_now", {}))


RESPONDERS = {"echo": echo_responder, "tool-then-text": tool_then_text_responder}


class FakeOpenAI:
    """See the module docstring. One instance = one server."""

    provider = "openai"

    def __init__(self, *, delay: float = 0.0, port: int = 0, chunks: int = 3) -> None:
        self.delay = delay
        self.chunks = chunks
        self.responder: Callable[[dict[str, Any]], Any] = echo_responder
        self.unknown_models: set[str] = set()
        self.strict = True
        self.send_usage = True
        self.requests: list[RecordedRequest] = []
        self.responder_errors: list[BaseException] = []
        self.base_url = ""
        self._port = port
        self._queue: deque[Reply | ErrorReply] = deque()
        self._changed: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None

    # -- public API (as FakeAnthropic's) ---------------------------------------------------------
    @property
    def api_url(self) -> str:
        """What `AsyncOpenAI(base_url=…)` and `[models.x] base_url` take."""
        return self.base_url + "/v1"

    def script(self, *replies: Reply | ErrorReply) -> None:
        self._queue.extend(replies)

    @property
    def last_request(self) -> RecordedRequest:
        if not self.requests:
            raise AssertionError("the fake OpenAI API has received no request")
        return self.requests[-1]

    @staticmethod
    def results_of(request: RecordedRequest) -> list[tuple[str, str]]:
        return [(m["tool_call_id"], m["content"]) for m in tool_results(request.json)]

    async def wait_for_requests(self, n: int, timeout: float = EVENTUALLY) -> list[RecordedRequest]:
        await self.wait_until(lambda: len(self.requests) >= n, timeout, f"{n} requests")
        return list(self.requests)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = EVENTUALLY,
                         what: str = "the condition") -> None:
        assert self._loop is not None and self._changed is not None, "the fake is not running"
        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(predicate)
        except TimeoutError as exc:
            raise TimeoutError(f"waited {timeout}s for {what}; {len(self.requests)} requests so far") from exc

    # -- lifecycle -------------------------------------------------------------------------------
    async def __aenter__(self) -> FakeOpenAI:
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Condition()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle_completions)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
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

    # -- handlers --------------------------------------------------------------------------------
    async def _handle_completions(self, request: web.Request) -> web.StreamResponse:
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
            return error_response(answer)
        content = [render(block) for block in answer.blocks]
        usage = openai_usage(body, content, answer.usage) if self.send_usage else None
        recorded.usage = usage
        if body.get("stream"):
            wanted = (body.get("stream_options") or {}).get("include_usage")
            return await self._stream(request, recorded, body["model"], content,
                                      usage if wanted else None, answer)
        return web.json_response(completion(body["model"], content, usage, answer.stop_reason))

    async def _choose(self, request: web.Request, body: Any) -> Reply | ErrorReply:
        if not request.headers.get("authorization", "").startswith("Bearer "):
            return error(401, "invalid_api_key", "You didn't provide an API key.")
        problem = request_problem(body) if self.strict else None
        if problem is not None:
            return error(400, "invalid_request_error", problem)
        if body["model"] in self.unknown_models:
            return error(404, "model_not_found", f"The model `{body['model']}` does not exist")
        if self._queue:
            return self._queue.popleft()
        try:
            answer = self.responder(body)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:  # surfaced again in __aexit__ with its traceback
            self.responder_errors.append(exc)
            return error(500, "server_error", f"fake responder raised {exc!r}",
                         {"x-should-retry": "false"})
        return text(answer) if isinstance(answer, str) else answer

    async def _stream(self, request: web.Request, recorded: RecordedRequest, model: str,
                      content: list[dict[str, Any]], usage: dict[str, Any] | None,
                      answer: Reply) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        try:
            for data in chunks(model, content, usage, answer.stop_reason, self.chunks):
                await response.write(sse_frame(data))
                if answer.chunk_delay:
                    await asyncio.sleep(answer.chunk_delay)  # simulated generation time
            await response.write(sse_frame("[DONE]"))
            await response.write_eof()
        except ConnectionResetError:
            recorded.aborted = True
            await self._notify()
        return response

    async def _notify(self) -> None:
        async with self._changed:  # type: ignore[union-attr]
            self._changed.notify_all()  # type: ignore[union-attr]


# ----------------------------------------------------------------------------- out of process

async def _serve(args: Any) -> None:
    import signal

    fake = FakeOpenAI(delay=args.delay, port=args.port)
    fake.responder = RESPONDERS[args.responder]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with fake:
        print(f"READY {fake.base_url}", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    """`python -m tests.fakes.openai_server [--port 0] [--delay S] [--responder NAME]`
    prints `READY http://127.0.0.1:PORT` (the API is under /v1)."""
    import argparse

    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible API on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = let the OS choose")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds added to every reply")
    parser.add_argument("--responder", choices=sorted(RESPONDERS), default="echo")
    asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
