"""Voice replies on Telegram: how long the voice follows the text, whose CPU it costs, and that
the text is no slower for it.

myclaw runs as `python -m bot run` (a child process) against the fake Telegram Bot API of
bench/telegram.py (in this process) and the fake Anthropic (its own process, echo responder),
with nothing configured for speech: espeak-ng speaks, the worker pool encodes OGG/Opus.

1. voice: a sender with `/voice on` sends messages whose answer is --chars characters (300).
   Per message: from the request carrying the whole answer text (the last text token, as the
   person sees it) to the sendVoice upload arriving. Target: p50 < 1 s. Also: the CPU of the
   turn, ours (the bot and its worker pool, read from /proc) beside espeak-ng's (the engine's
   processes are the bot's children, counted when reaped).
2. text latency: two senders, one with /voice on and one with /voice off, take turns; each
   message's text latency (update available → full answer arrived, as bench/telegram.py
   measures it) and our CPU per turn, whose difference is what a voice reply costs us. The
   next message goes out once the previous voice reply arrived.

Encoding: libopus through PyAV (24 kHz, complexity 3) spent 0.20 s of CPU on a 300-character
answer (21 s of speech) where libsndfile (soundfile, fixed complexity, 48 kHz) spent 0.57 s,
measured on this machine; hence PyAV (bot/media/speech/encode.py).

    .venv/bin/python bench/speech.py [--messages 20] [--chars 300]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, fake_anthropic, percentile

from tests.support.process_tree import descendants

_spec = importlib.util.spec_from_file_location("bench_telegram", ROOT / "bench" / "telegram.py")
bench_telegram = importlib.util.module_from_spec(_spec)   # not "telegram": that is the library
sys.modules["bench_telegram"] = bench_telegram
_spec.loader.exec_module(bench_telegram)

VOICE_TARGET_S = 1.0
SPOKEN, SILENT, WARMUP = 5151, 5252, 5353
TICK = os.sysconf("SC_CLK_TCK")


class VoiceTelegram(bench_telegram.TimedTelegram):
    """The timed fake, plus when each chat's voice messages arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.voices: dict[int, list[float]] = {}
        self._voice_arrived = asyncio.Condition()

    def _api_sendVoice(self, params: dict[str, Any]) -> dict[str, Any]:
        arrived = bench_telegram._arrived.get() or time.perf_counter()
        self.voices.setdefault(int(params["chat_id"]), []).append(arrived)
        asyncio.get_running_loop().create_task(self._tell())
        return super()._api_sendVoice(params)

    async def _tell(self) -> None:
        async with self._voice_arrived:
            self._voice_arrived.notify_all()

    async def voice_count(self, chat: int, count: int, timeout: float) -> float:
        async with self._voice_arrived:
            await asyncio.wait_for(self._voice_arrived.wait_for(
                lambda: len(self.voices.get(chat, [])) >= count), timeout)
        return self.voices[chat][count - 1]


def cpu_split(pid: int) -> tuple[float, float]:
    """(ours, engine's) CPU seconds so far: the bot and its live descendants (the worker pool),
    and its reaped children (each espeak-ng run)."""
    def fields(of: int) -> list[str]:
        with open(f"/proc/{of}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    own = fields(pid)
    ours = (int(own[11]) + int(own[12])) / TICK
    for child in descendants(pid):
        try:
            ours += (int(fields(child)[11]) + int(fields(child)[12])) / TICK
        except (OSError, IndexError):
            pass   # ended while we looked
    return ours, (int(own[13]) + int(own[14])) / TICK


async def choose(bot: Any, user: int, word: str, count: int, timeout: float) -> None:
    """`/voice word` from `user`; its answer (a notice, not timed) is the `count`th message."""
    bot.tg.send(user, f"/voice {word}", "")
    await bot.tg.wait_for("sendMessage", timeout=timeout, count=count)


def message_for(chars: int, i: int) -> str:
    """A message whose echo ("ok: " + it) is `chars` characters of plain sentences."""
    body = " ".join(f"Sentence {i}.{n} is plain speech." for n in range(chars // 20))
    return body[:chars - 4].rstrip()


async def voice_phase(args: argparse.Namespace, bot: Any) -> list[tuple[float, float, float]]:
    results = []
    for i in range(args.messages):
        before = cpu_split(bot.process.pid)
        text = message_for(args.chars, i)
        exchange = await bench_telegram.one_message(bot, SPOKEN, text, args.answer_timeout)
        voiced = await bot.tg.voice_count(SPOKEN, i + 2, args.answer_timeout)   # +1: warm-up
        await asyncio.sleep(0.05)   # the engine's process is reaped just after the upload
        after = cpu_split(bot.process.pid)
        results.append((voiced - exchange.answered, after[0] - before[0], after[1] - before[1]))
        print(f"  voice {i + 1:3d}: {1000 * (voiced - exchange.answered):7.1f} ms after the text "
              f"(turn CPU: ours {1000 * (after[0] - before[0]):5.0f} ms, espeak-ng "
              f"{1000 * (after[1] - before[1]):5.0f} ms)", flush=True)
    return results


async def text_phase(args: argparse.Namespace, bot: Any) -> dict[str, tuple[list[float], list[float]]]:
    """Per label: each message's text latency (ms) and the bot's CPU for the whole turn (s)."""
    measured: dict[str, tuple[list[float], list[float]]] = {"voice on": ([], []),
                                                            "voice off": ([], [])}
    spoken = len(bot.tg.voices.get(SPOKEN, []))
    for i in range(args.messages):
        for user, label in ((SPOKEN, "voice on"), (SILENT, "voice off")):
            before = cpu_split(bot.process.pid)
            text = message_for(args.chars, 1000 + i)
            exchange = await bench_telegram.one_message(bot, user, text, args.answer_timeout)
            if user == SPOKEN:
                spoken += 1
                await bot.tg.voice_count(SPOKEN, spoken, args.answer_timeout)
            await asyncio.sleep(0.05)   # the turn's last writes, and the engine's process reaped
            after = cpu_split(bot.process.pid)
            measured[label][0].append(exchange.ms)
            measured[label][1].append(after[0] - before[0])
    return measured


async def run(args: argparse.Namespace) -> bool:
    tmp = Path(tempfile.mkdtemp(prefix="myclaw-bench-speech-"))
    bench_telegram.TimedTelegram = VoiceTelegram   # running_bot builds the fake it names
    with fake_anthropic(delay=0.0) as anthropic_url:
        async with bench_telegram.running_bot("myclaw", anthropic_url, tmp / "bot",
                                              [SPOKEN, SILENT, WARMUP], None,
                                              args.start_timeout) as bot:
            await choose(bot, SPOKEN, "on", 1, args.answer_timeout)
            await choose(bot, SILENT, "off", 2, args.answer_timeout)
            # Warm-up: the worker pool and its imports start on the first voice reply.
            await bench_telegram.one_message(bot, SPOKEN, message_for(args.chars, 0), 30)
            await bot.tg.voice_count(SPOKEN, 1, 30)
            print(f"1. voice {args.messages} × {args.chars}-character answers (espeak-ng)")
            voices = await voice_phase(args, bot)
            print("2. text latency, voice on and off taking turns")
            texts = await text_phase(args, bot)
    after = sorted(v[0] for v in voices)
    p50 = percentile(after, 50)
    print(f"\nvoice after the text: p50 {1000 * p50:.0f} ms, p90 {1000 * percentile(after, 90):.0f} ms,"
          f" max {1000 * after[-1]:.0f} ms (target < {1000 * VOICE_TARGET_S:.0f} ms)")
    print(f"CPU per turn with voice: ours {1000 * statistics.mean(v[1] for v in voices):.0f} ms "
          f"(bot + worker pool, text and voice), espeak-ng "
          f"{1000 * statistics.mean(v[2] for v in voices):.0f} ms")
    for label, (values, cpu) in texts.items():
        print(f"text latency with {label:<9}: p50 {percentile(values, 50):6.1f} ms  "
              f"p90 {percentile(values, 90):6.1f} ms  mean {statistics.mean(values):6.1f} ms  "
              f"(our CPU per turn {1000 * statistics.mean(cpu):4.0f} ms)")
    extra = statistics.mean(texts["voice on"][1]) - statistics.mean(texts["voice off"][1])
    print(f"our CPU a voice reply adds to a turn: {1000 * extra:.0f} ms")
    print(f"load average {os.getloadavg()[0]:.2f} (other work on the machine inflates these)")
    return p50 < VOICE_TARGET_S


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--chars", type=int, default=300, help="characters of each answer")
    parser.add_argument("--start-timeout", type=float, default=60.0)
    parser.add_argument("--answer-timeout", type=float, default=20.0)
    args = parser.parse_args()
    return 0 if asyncio.run(run(args)) else 1


if __name__ == "__main__":
    sys.exit(main())
