"""A turn with one tool call (two model calls) through the whole runtime, versus the same two
raw SDK calls alone, against the fake Anthropic (separate process, zero delay).

    .venv/bin/python bench/turn_overhead.py [--turns 200]

1. The turn: ratio of p50s, myclaw's whole turn over the same two streaming SDK calls replayed.
   Target ≤ 1.10: our overhead is noise next to the API.
2. Around the tool call: from the moment the first call's answer (with its tool_use) is back to
   the arrival of the next model request at the fake (its own log): schema check, policy,
   write-ahead row, journal, receipt, wrapping, the next request's admission. The floor is a
   bare SDK tool loop doing the least: run the same tool, append the tool_result, call again.
   Target ≤ 1.5× the floor's.

The three are interleaved turn by turn (myclaw, replay, floor loop), so drift in machine load
hits each alike; the machine is shared, so quote medians.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import statistics
import time
from typing import Any

from _common import NullSink, fake_anthropic, make_config, summary

TURN_TARGET = 1.10
GAP_TARGET = 1.5


async def _streamed(raw: Any, params: dict[str, Any]) -> Any:
    """One streaming call as bot.llm makes it; the final message."""
    async with raw.messages.stream(**params) as stream:
        async for _event in stream:
            pass
        return await stream.get_final_message()


def _blocks(message: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": b.text} if b.type == "text" else
            {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
            for b in message.content if b.type in ("text", "tool_use")]


async def floor_tool_turn(raw: Any, tool: Any, text: str, history: list[dict[str, Any]]) -> float:
    """The least a bot does around one tool call; returns when the first answer was back."""
    history.append({"role": "user", "content": text})
    params = {"model": "claude-sonnet-5-5", "max_tokens": 1024, "messages": history}
    first = await _streamed(raw, params)
    answered = time.perf_counter()
    history.append({"role": "assistant", "content": _blocks(first)})
    results = []
    for block in first.content:
        if block.type == "tool_use":
            output = await tool.execute(None, **block.input)
            results.append({"type": "tool_result", "tool_use_id": block.id,
                            "content": json.dumps(output)})
    history.append({"role": "user", "content": results})
    second = await _streamed(raw, params)
    history.append({"role": "assistant", "content": _blocks(second)})
    del history[:-20]   # bounded, like a real bot's window
    while (history and history[0]["role"] != "user") or (history and isinstance(
            history[0]["content"], list)):
        del history[0]
    return answered


async def request_times(base_url: str) -> list[float]:
    import aiohttp

    async with aiohttp.ClientSession() as session, \
            session.get(f"{base_url}/_fake/requests") as response:
        recorded = await response.json()
    # The fake stamps arrivals with time.monotonic(); on Linux perf_counter() is the same clock.
    return sorted(r["time"] for r in recorded if r["path"].endswith("/messages"))


def gaps(answered: list[float], times: list[float]) -> list[float]:
    """ms from each first answer to the next request's arrival."""
    out = []
    for moment in answered:
        index = bisect.bisect_left(times, moment)
        if index < len(times):
            out.append((times[index] - moment) * 1000)
    return out


async def run(turns: int, warmup: int) -> None:
    import anthropic

    from bot.app import App
    from bot.core.events import IncomingMessage
    from bot.ops.process import long_lived_heap

    with fake_anthropic(responder="tool-then-text") as base_url:
        with long_lived_heap():   # as `myclaw run` starts
            app = await App.open(make_config(base_url))
        captured: list[dict[str, Any]] = []
        original = app.services.llm.create
        answered_ours: list[float] = []

        async def capturing(**params: Any) -> Any:
            captured.append({k: v for k, v in params.items()
                             if k not in ("on_text", "sender", "level")})
            response = await original(**params)
            if len(captured) == 1:
                answered_ours.append(time.perf_counter())
            return response

        app.services.llm.create = capturing
        # The same client configuration as bot.llm.client (SDK with its aiohttp transport).
        raw = anthropic.AsyncAnthropic(api_key="bench-key", base_url=base_url, max_retries=0,
                                       http_client=anthropic.DefaultAioHttpClient())
        tool = app.services.registry.get("time_now")
        floor_histories: dict[int, list[dict[str, Any]]] = {}
        answered_floor: list[float] = []
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
            floor_answered = await floor_tool_turn(raw, tool, message.text,
                                                   floor_histories.setdefault(i % 10, []))
            if i >= warmup:
                ours.append(elapsed)
                theirs.append(baseline)
                answered_floor.append(floor_answered)
        times = await request_times(base_url)
        await raw.close()
        await app.close()
    report(turns, ours, theirs, gaps(answered_ours[warmup:], times), gaps(answered_floor, times))


def report(turns: int, ours: list[float], theirs: list[float], gap_ours: list[float],
           gap_floor: list[float]) -> None:
    p50_ratio = statistics.median(ours) / statistics.median(theirs)
    gap_ratio = statistics.median(gap_ours) / statistics.median(gap_floor)
    print(f"turn_overhead: {turns} turns, each 2 model calls + 1 tool call (streaming)")
    print(f"  myclaw runtime : {summary(ours)}")
    print(f"  raw SDK calls  : {summary(theirs)}")
    print(f"  ratio (p50)    : {p50_ratio:.3f}   target ≤ {TURN_TARGET:.2f}   "
          f"{'OK' if p50_ratio <= TURN_TARGET else 'NOT MET'}")
    print(f"  overhead (p50) : {statistics.median(ours) - statistics.median(theirs):.2f} ms per turn")
    print("  around the tool call (first answer back → next request arrives):")
    print(f"    myclaw       : {summary(gap_ours)}")
    print(f"    floor loop   : {summary(gap_floor)}")
    print(f"    ratio (p50)  : {gap_ratio:.2f}   target ≤ {GAP_TARGET:.1f}   "
          f"{'OK' if gap_ratio <= GAP_TARGET else 'NOT MET'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(run(args.turns, args.warmup))


if __name__ == "__main__":
    main()
