"""A turn on the OpenAI-compatible path (one tool call: two model calls) through the whole
runtime, versus the raw `openai` SDK sending the same two requests, against the fake
OpenAI-compatible server (separate process, zero delay). A/B/A for every turn: our turn, the
raw calls of that turn, our turn again (in another conversation of the same size), so drift in
the machine's load shows. Our side is charged twice for converting the request (the bench
records what was sent by converting it again).

    .venv/bin/python bench/providers.py [--turns 200]

Target: ratio of p50s ≤ 1.15. The Anthropic path is measured by bench/turn_overhead.py.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from _common import NullSink, fake_anthropic, make_config, percentile, summary

FAKE = "tests.fakes.openai_server"


class Turns:
    """Our turns on one provider, each recording the OpenAI requests its model calls sent."""

    def __init__(self, app: Any):
        from bot.llm.compat.request import chat_request

        self.app, self.sent = app, []
        llm = app.services.llm
        spec = llm.models.resolve("local")
        provider = llm.provider(spec)
        original = provider.complete

        async def recording(params: dict[str, Any], on_text: Any) -> Any:
            self.sent.append(chat_request(params, spec.capabilities))
            return await original(params, on_text)
        provider.complete = recording

    async def one(self, chat: str, i: int) -> tuple[float, list[dict[str, Any]]]:
        from bot.core.events import IncomingMessage

        self.sent = []
        message = IncomingMessage("cli:local", chat, f"what time is it? ({i})")
        started = time.perf_counter()
        await self.app.agent.handle(message, NullSink())
        elapsed = (time.perf_counter() - started) * 1000
        assert len(self.sent) == 2, f"expected two model calls, got {len(self.sent)}"
        return elapsed, self.sent


async def raw_turn(raw: Any, requests: list[dict[str, Any]]) -> float:
    started = time.perf_counter()
    for request in requests:   # the same streaming calls the provider makes
        stream = await raw.chat.completions.create(
            stream=True, stream_options={"include_usage": True}, **request)
        async with stream:
            async for _chunk in stream:
                pass
    return (time.perf_counter() - started) * 1000


async def run(turns: int, warmup: int) -> None:
    import openai

    from bot.app import App
    from bot.ops.process import long_lived_heap

    with fake_anthropic(responder="tool-then-text", module=FAKE) as base_url:
        overrides = {"models": {"local": {"provider": "openai", "base_url": base_url + "/v1",
                                          "model": "bench-model"}},
                     "agent": {"model": "local", "small_model": "local", "supra_model": "local"}}
        with long_lived_heap():   # as `myclaw run` starts
            app = await App.open(make_config(base_url, overrides))
        # The same client configuration as bot.llm.compat.provider.
        raw = openai.AsyncOpenAI(api_key="bench-key", base_url=base_url + "/v1", max_retries=0)
        turns_ = Turns(app)
        first, baseline, again = [], [], []
        for i in range(warmup + turns):
            # A, B, A for each turn: ten ongoing conversations each for the two A's (round
            # robin, histories growing as in real use), B replaying what the first A sent.
            ours, sent = await turns_.one(f"a{i % 10}", i)
            theirs = await raw_turn(raw, sent)
            ours_again, _ = await turns_.one(f"c{i % 10}", i)
            if i >= warmup:
                first.append(ours)
                baseline.append(theirs)
                again.append(ours_again)
        await raw.close()
        await app.close()
    ours = percentile(first + again, 50)
    theirs = percentile(baseline, 50)
    ratio = ours / theirs
    print(f"providers: {turns} turns of each kind, each 2 model calls + 1 tool call (streaming), "
          "OpenAI-compatible endpoint")
    print(f"  A myclaw runtime : {summary(first)}")
    print(f"  B raw openai SDK : {summary(baseline)}")
    print(f"  A myclaw again   : {summary(again)}")
    print(f"  ratio (p50 of A / p50 of B): {ratio:.3f}   target ≤ 1.15   "
          f"{'OK' if ratio <= 1.15 else 'OVER TARGET'}")
    print(f"  overhead (p50)   : {ours - theirs:.2f} ms per turn")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(run(args.turns, args.warmup))


if __name__ == "__main__":
    main()
