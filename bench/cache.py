"""Prompt caching over a 10-turn conversation (with tool calls) against the fake Anthropic.

    .venv/bin/python bench/cache.py [--turns 10]

For every request: the fraction of its input that lies before the last cache breakpoint
(cacheable), and the fraction the fake's cache simulation served as cache reads.
Target: cacheable fraction ≥ 0.9 from turn 2 on.
"""

from __future__ import annotations

import argparse
import asyncio

from _common import NullSink, make_config


async def run(turns: int) -> None:
    from bot.app import App
    from bot.core.events import IncomingMessage
    from tests.fakes.anthropic_server import FakeAnthropic, tool_then_text_responder

    async with FakeAnthropic() as fake:
        fake.responder = tool_then_text_responder
        app = await App.open(make_config(fake.base_url))
        rows = []
        for turn in range(1, turns + 1):
            before = len(fake.requests)
            text = f"Turn {turn}: what time is it now, and what did I ask before? " + "context " * 40
            await app.agent.handle(IncomingMessage("cli:local", "local", text), NullSink())
            for request in fake.requests[before:]:
                usage = request.usage
                total = (usage["input_tokens"] + usage["cache_read_input_tokens"]
                         + usage["cache_creation_input_tokens"])
                rows.append((turn, fake.cached_fraction(request),
                             usage["cache_read_input_tokens"] / total if total else 0.0, total))
        await app.close()
    print(f"cache: {turns}-turn conversation, {len(rows)} model requests (tool call each turn)")
    print("  turn  request-tokens  cacheable-before-last-breakpoint  served-from-cache")
    for turn, cacheable, read, total in rows:
        print(f"  {turn:>4}  {total:>14}  {cacheable:>32.3f}  {read:>17.3f}")
    later = [cacheable for turn, cacheable, _, _ in rows if turn >= 2]
    worst = min(later) if later else 0.0
    print(f"  minimum cacheable fraction from turn 2: {worst:.3f}   target ≥ 0.90   "
          f"{'OK' if worst >= 0.9 else 'NOT MET'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=10)
    asyncio.run(run(parser.parse_args().turns))


if __name__ == "__main__":
    main()
