"""A turn with one tool call (two model calls) through the whole runtime, versus the same two
raw SDK calls alone, against the fake Anthropic (separate process, zero delay).

    .venv/bin/python bench/turn_overhead.py [--turns 200]

Target: ratio of p50s ≤ 1.15 — our overhead is noise next to the API.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from _common import NullSink, fake_anthropic, make_config, summary


async def run(turns: int, warmup: int) -> None:
    import anthropic

    from bot.app import App, long_lived_heap
    from bot.core.events import IncomingMessage

    with fake_anthropic(responder="tool-then-text") as base_url:
        with long_lived_heap():   # as `myclaw run` starts
            app = await App.open(make_config(base_url))
        captured: list[dict[str, Any]] = []
        original = app.services.llm.create

        async def capturing(**params: Any) -> Any:
            captured.append({k: v for k, v in params.items()
                             if k not in ("on_text", "sender", "level")})
            return await original(**params)

        app.services.llm.create = capturing
        # The same client configuration as bot.llm.client (SDK with its aiohttp transport).
        raw = anthropic.AsyncAnthropic(api_key="bench-key", base_url=base_url, max_retries=0,
                                       http_client=anthropic.DefaultAioHttpClient())
        ours: list[float] = []
        theirs: list[float] = []
        for i in range(warmup + turns):
            captured.clear()
            # Ten ongoing conversations, round robin: histories grow as in real use.
            message = IncomingMessage("cli:local", f"chat{i % 10}", f"what time is it? ({i})")
            started = time.perf_counter()
            await app.agent.handle(message, NullSink())
            elapsed = (time.perf_counter() - started) * 1000
            assert len(captured) == 2, f"expected two model calls, got {len(captured)}"
            started = time.perf_counter()
            for params in captured:  # the same streaming calls bot.llm.client makes
                stream = await raw.messages.create(stream=True, **params)
                async with stream:
                    async for _event in stream:
                        pass
            baseline = (time.perf_counter() - started) * 1000
            if i >= warmup:
                ours.append(elapsed)
                theirs.append(baseline)
        await raw.close()
        await app.close()
    ours.sort()
    theirs.sort()
    p50_ratio = ours[len(ours) // 2] / theirs[len(theirs) // 2]
    print(f"turn_overhead: {turns} turns, each 2 model calls + 1 tool call (streaming)")
    print(f"  myclaw runtime : {summary(ours)}")
    print(f"  raw SDK calls  : {summary(theirs)}")
    print(f"  ratio (p50)    : {p50_ratio:.3f}   target ≤ 1.15   "
          f"{'OK' if p50_ratio <= 1.15 else 'OVER TARGET'}")
    print(f"  overhead (p50) : {ours[len(ours) // 2] - theirs[len(theirs) // 2]:.2f} ms per turn")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(run(args.turns, args.warmup))


if __name__ == "__main__":
    main()
