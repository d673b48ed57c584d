"""Fair sharing of model slots: one sender floods the bot from many chats at once while 100
normal senders each send one message, spread evenly over a few seconds; the model takes
--delay seconds per call.

    .venv/bin/python bench/fairness.py [--slots 20] [--share 0.25] [--flood-chats 200]

Prints the normal senders' wait for their answer (p50/p99) in three runs: no flood; flood with
fair sharing off (max_share_of_model_slots = 1.0, one FIFO queue); flood with the share.
Target: p99 with the flood and the share within 1.5x of the no-flood p99.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from _common import NullSink, fake_anthropic, make_config, percentile


async def scenario(base_url: str, *, slots: int, share: float, flood_chats: int, normal: int,
                   spread: float) -> list[float]:
    """The normal senders' answer times (s) with `flood_chats` chats of one sender flooding."""
    from bot.app import App
    from bot.core.events import IncomingMessage

    app = await App.open(make_config(base_url, {
        "agent": {"max_concurrent_llm_calls": slots},
        "senders": {"unknown": "supervised"},
        "rate_limits": {"messages_per_minute": 0, "max_share_of_model_slots": share},
        "budgets": {"sender_daily": 0, "sender_monthly": 0, "global_daily": 0}}))
    stop = asyncio.Event()

    async def flood(chat: int) -> None:
        n = 0
        while not stop.is_set():
            await app.agent.handle(IncomingMessage("telegram:999", f"f{chat}", f"flood {n}",
                                                   "telegram"), NullSink())
            n += 1

    async def one(i: int) -> float:
        await asyncio.sleep(i * spread / normal)  # arrivals spread evenly, not all at once
        started = time.perf_counter()
        await app.agent.handle(IncomingMessage(f"telegram:{i}", str(i), f"hello {i}", "telegram"),
                               NullSink())
        return time.perf_counter() - started

    await app.agent.handle(IncomingMessage("telegram:0", "0", "warm up", "telegram"), NullSink())
    flooders = [asyncio.create_task(flood(c)) for c in range(flood_chats)]
    if flooders:
        await asyncio.sleep(0.5)  # let the flood fill the slots and queue up first
    waits = await asyncio.gather(*(one(i) for i in range(1, normal + 1)))
    stop.set()
    await app.agent.shutdown(grace=0.1)  # cancel the flood's backlog
    await asyncio.gather(*flooders, return_exceptions=True)
    await app.close()
    return list(waits)


def line(label: str, waits: list[float]) -> str:
    return (f"  {label:<34} p50 {percentile(waits, 50):6.2f} s   "
            f"p99 {percentile(waits, 99):6.2f} s   max {max(waits):6.2f} s")


async def run(args: argparse.Namespace) -> None:
    common = {"slots": args.slots, "normal": args.normal, "spread": args.spread}
    with fake_anthropic(delay=args.delay) as base_url:
        calm = await scenario(base_url, share=args.share, flood_chats=0, **common)
        unfair = await scenario(base_url, share=1.0, flood_chats=args.flood_chats, **common)
        fair = await scenario(base_url, share=args.share, flood_chats=args.flood_chats, **common)
    print(f"fairness: {args.slots} model slots, model delay {args.delay:.1f} s, {args.normal} "
          f"normal senders over {args.spread:.0f} s, one sender flooding from "
          f"{args.flood_chats} chats")
    print("  normal senders' wait for their answer:")
    print(line("no flood", calm))
    print(line("flood, fair sharing off (1.0)", unfair))
    print(line(f"flood, share {args.share}", fair))
    ratio = percentile(fair, 99) / percentile(calm, 99)
    print(f"  p99 with flood and share / p99 without flood: {ratio:.2f}   target <= 1.50   "
          f"{'OK' if ratio <= 1.5 else 'NOT MET'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--slots", type=int, default=20, help="[agent] max_concurrent_llm_calls")
    parser.add_argument("--share", type=float, default=0.25, help="max_share_of_model_slots")
    parser.add_argument("--flood-chats", type=int, default=200)
    parser.add_argument("--normal", type=int, default=100, help="normal senders, one message each")
    parser.add_argument("--spread", type=float, default=10.0, help="seconds over which they arrive")
    parser.add_argument("--delay", type=float, default=1.0, help="model delay per call (s)")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
