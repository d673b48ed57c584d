"""Concurrency: 500 sessions each send one message while the model takes 1.0 s to answer.

    .venv/bin/python bench/concurrency.py [--sessions 500] [--delay 1.0]

Prints the wall time and its ratio to one model call (target ≤ 1.3, all answered), then checks
that five messages in a row from one sender are answered in order.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from _common import fake_anthropic, make_config


class Answers:
    def __init__(self) -> None:
        self.texts: list[str] = []

    async def emit(self, event: object) -> None:
        from bot.core.events import Done

        if isinstance(event, Done):
            self.texts.append(event.text)


async def run(sessions: int, delay: float) -> None:
    from bot.app import App
    from bot.core.events import IncomingMessage

    with fake_anthropic(delay=delay) as base_url:
        app = await App.open(make_config(base_url, {"senders": {"unknown": "supervised"}}))
        warm = Answers()
        await app.agent.handle(IncomingMessage("telegram:0", "0", "warm up", "telegram"), warm)
        sinks = [Answers() for _ in range(sessions)]
        started = time.perf_counter()
        await asyncio.gather(*(
            app.agent.handle(IncomingMessage(f"telegram:{i}", str(i), f"hello {i}", "telegram"), sink)
            for i, sink in enumerate(sinks, start=1)))
        wall = time.perf_counter() - started
        answered = sum(1 for i, s in enumerate(sinks, start=1) if s.texts == [f"ok: hello {i}"])
        print(f"concurrency: {sessions} sessions, one message each, model answers after {delay:.1f} s")
        print(f"  wall time {wall:.2f} s   ratio {wall / delay:.2f}   target ≤ 1.30   "
              f"answered {answered}/{sessions}   "
              f"{'OK' if wall / delay <= 1.3 and answered == sessions else 'NOT MET'}")

        floor = await raw_sdk_floor(base_url, sessions, app.agent.prompt.params)
        print(f"  floor: the same {sessions} model calls made with the bare SDK (same transport, "
              f"streaming): {floor:.2f} s (ratio {floor / delay:.2f}); myclaw / floor = "
              f"{wall / floor:.2f}")

        ordered = Answers()
        started = time.perf_counter()
        await asyncio.gather(*(
            app.agent.handle(IncomingMessage("telegram:1", "1", f"message {n}", "telegram"), ordered)
            for n in range(5)))
        wall = time.perf_counter() - started
        expected = [f"ok: message {n}" for n in range(5)]
        print(f"  same sender, 5 messages at once: answered in order: {ordered.texts == expected} "
              f"({wall:.2f} s, one at a time as intended)")
        await app.close()


async def raw_sdk_floor(base_url: str, sessions: int, build_params) -> float:
    """What this machine can do at best: the same number of concurrent streaming calls with
    the anthropic SDK alone (same aiohttp transport, a request the size of ours)."""
    import anthropic

    from bot.runtime.dispatch import Turn

    client = anthropic.AsyncAnthropic(api_key="bench-key", base_url=base_url, max_retries=0,
                                      http_client=anthropic.DefaultAioHttpClient())
    turn = Turn("s", "telegram:1", "1", "telegram", "supervised", None)  # type: ignore[arg-type]

    async def one(i: int) -> None:
        messages = [{"role": "user", "content": [{"type": "text", "text": f"hello {i}"}]}]
        stream = await client.messages.create(stream=True, **build_params(turn, messages))
        async with stream:
            async for _event in stream:
                pass

    await one(0)
    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(1, sessions + 1)))
    wall = time.perf_counter() - started
    await client.close()
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--delay", type=float, default=1.0)
    args = parser.parse_args()
    asyncio.run(run(args.sessions, args.delay))


if __name__ == "__main__":
    main()
