"""How long renderers and previews take on pathological inputs, and how they grow.

    .venv/bin/python bench/hostile_inputs.py [--small 10000] [--large 80000]

For every renderer (Telegram, Discord, HTML reduction, log redaction, the secret scrubbing of
tool results): the slowest family of
tests/support/looplag.py at each size, in CPU milliseconds, and the largest growth ratio (linear ≈ 8).
Then the fs_write preview of a repetitive 40 KB file: wall time, and the longest the event loop
was blocked meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts the project on sys.path)

# bench/telegram.py would shadow the telegram package for the renderers imported below: look
# in bench/ last (the CPU pool's workers import this script again, _common included).
_HERE = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]


def renderer_rows(small: int, large: int) -> None:
    from bot.core.logs import Redactor
    from channels.discord.rendering import split_message as discord_split
    from channels.telegram.rendering import split_message as telegram_split
    from tests.support.looplag import _best_time, hostile_inputs
    from tools._html import reduce_html

    redactor = Redactor(["a-configured-secret-value"])
    renderers = {"telegram": telegram_split, "discord": discord_split,
                 "html": lambda t: reduce_html(t, "https://e.org/"), "redaction": redactor.text,
                 "secrets": secret_scrubber()}
    print(f"{'renderer':10} {'slowest family':18} {f'{small} chars':>12} {f'{large} chars':>12} "
          f"{'worst growth':>13}")
    for name, fn in renderers.items():
        small_inputs, large_inputs = hostile_inputs(small), hostile_inputs(large)
        rows = []
        for family in small_inputs:
            a, b = _best_time(fn, small_inputs[family]), _best_time(fn, large_inputs[family])
            rows.append((b, a, b / max(a, 1e-5), family))
        slowest = max(rows)
        worst = max(rows, key=lambda r: r[2])
        print(f"{name:10} {slowest[3]:18} {slowest[1] * 1000:10.2f}ms {slowest[0] * 1000:10.2f}ms "
              f"{worst[2]:8.1f} ({worst[3]})")


def secret_scrubber():
    """What every tool result goes through: a workspace .env with 30 values, plus own secrets."""
    from bot.core.secrets.redaction import SecretRedaction

    tmp = Path(tempfile.mkdtemp(prefix="myclaw-bench-"))
    (tmp / ".env").write_text("".join(f"KEY_{i}=Value-{i:04d}-xY9zQ\n" for i in range(30)))
    redaction = SecretRedaction(["a-configured-secret-value"])
    loop = asyncio.new_event_loop()   # one loop for every call, as in the bot
    return lambda text: loop.run_until_complete(redaction.scrub([tmp], text))


async def preview_row() -> None:
    from bot.config.settings import from_dict
    from bot.core.tool import CallContext
    from tests.support.looplag import LoopWatch, _tick
    from tools import fs_write

    tmp = Path(tempfile.mkdtemp(prefix="myclaw-bench-"))
    config = from_dict({"agent": {"workspace": str(tmp / "ws")}, "store": {"path": str(tmp / "db")}},
                       env={"HOME": str(tmp), "ANTHROPIC_API_KEY": "x"})
    config.workspace.mkdir(parents=True, exist_ok=True)
    ctx = CallContext(workspace=config.workspace, settings=config)
    old = "".join(f"{i % 101}\n" for i in range(13_000))
    new = "".join(f"{i % 103}\n" for i in range(13_000))
    (config.workspace / "data.txt").write_text(old)
    watch = LoopWatch()
    ticker = asyncio.create_task(_tick(watch))
    started = time.perf_counter()
    preview = await fs_write.build(config).dry_run(ctx, path="data.txt", content=new)
    elapsed = time.perf_counter() - started
    ticker.cancel()
    print(f"\nfs_write preview, repetitive {len(old) // 1000} KB file: {elapsed:.2f} s wall, "
          f"loop blocked at most {watch.max_lag * 1000:.0f} ms, diff {len(preview['diff']):,} chars "
          f"({preview['summary']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=80_000)
    args = parser.parse_args()
    renderer_rows(args.small, args.large)
    asyncio.run(preview_row())


if __name__ == "__main__":
    main()
