"""What a photo costs us: the added latency of a photo turn over a text turn (5 MB photo,
scaling included), and the peak memory while a 20 MB photo is processed.

    .venv/bin/python bench/media.py [--turns 10]

Latency: whole turns through the real App against the fake Anthropic in its own process (zero
delay), each in a fresh conversation, for a camera-like 12-megapixel photo and for a
random-noise photo of the same weight (fewer pixels, but the costliest to decode per byte).
"Our CPU" is the CPU time of this process (all its threads) plus that of its worker processes
(bot.toolbox.offload's pool, where the scaling runs) — our own time, without the fake's. Targets: photo
minus text under 50 ms of our own time (p50); peak memory for a 20 MB photo under +100 MiB
(measured in a fresh process as the rise of the peak RSS of it and of its workers while the
photo goes from bytes to stored reference and prompt block). Also printed, for comparison:
what Pillow's own `thumbnail()` and a JPEG encode of the same photos cost in one process, and
what only reading each costs (a 1/8-scale decode still Huffman-decodes every byte): the least
any bot that looks at the photo spends.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, NullSink, fake_anthropic, make_config, percentile

LATENCY_TARGET_MS = 50.0
BEYOND_DECODE_TARGET_MS = 15.0   # photo minus text, minus the least any bot spends reading it
MEMORY_TARGET_MIB = 100.0
FAKE_SERVER = "anthropic_server"   # a child process whose time is not ours


def _stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rpartition(")")[2].split()


def descendants(exclude: str = FAKE_SERVER) -> list[int]:
    """This process's descendants (the offload workers and their fork server), except the
    subtree of any process whose command line contains `exclude`."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                children.setdefault(int(_stat_fields(int(entry))[1]), []).append(int(entry))
            except (OSError, IndexError):
                continue          # gone meanwhile
    found, todo = [], list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if exclude.encode() in cmdline.read():
                    continue
        except OSError:
            continue
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def workers_cpu_seconds() -> float:
    """CPU time of the worker processes so far, in nanosecond resolution (schedstat)."""
    total = 0
    for pid in descendants():
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/schedstat") as schedstat:
                    total += int(schedstat.read().split()[0])
        except OSError:
            continue
    return total / 1e9


def camera_jpeg(min_bytes: int) -> bytes:
    """A 12-megapixel 4000×3000 JPEG like a phone's: smooth content plus sensor-like noise,
    its quality raised until it weighs `min_bytes`."""
    from PIL import Image

    base = Image.linear_gradient("L").resize((4000, 3000)).convert("RGB")
    image = Image.blend(base, Image.effect_noise((4000, 3000), 40).convert("RGB"), 0.35)
    for quality in range(80, 100):
        out = io.BytesIO()
        image.save(out, "JPEG", quality=quality)
        if out.tell() >= min_bytes:
            return out.getvalue()
    return out.getvalue()


def noise_jpeg(min_bytes: int) -> bytes:
    """A photo-like 4:3 JPEG (random pixels compress like a detailed photo, or worse)."""
    from PIL import Image

    width = int((min_bytes / 1.45 * 4 / 3) ** 0.5)
    while True:
        height = width * 3 // 4
        out = io.BytesIO()
        Image.frombytes("RGB", (width, height), os.urandom(width * height * 3)).save(out, "JPEG", quality=97)
        if out.tell() >= min_bytes:
            return out.getvalue()
        width = int(width * 1.02)


def pillow_floor_ms(data: bytes, runs: int) -> float:
    """CPU p50 of what a bot using Pillow's defaults does with this photo: open it, `thumbnail`
    it to the size we send (a reduced-scale decode, then bicubic), encode a JPEG."""
    from PIL import Image

    from bot.media.images import fitted
    from bot.media.limits import MediaLimits

    limits, samples = MediaLimits(), []
    for _ in range(runs + 2):
        cpu = time.process_time()
        with Image.open(io.BytesIO(data)) as image:
            image.thumbnail(fitted(*image.size, limits.max_edge_px, limits.max_model_pixels))
            image.save(io.BytesIO(), "JPEG", quality=85)
        samples.append((time.process_time() - cpu) * 1000)
    return percentile(samples[2:], 50)


def entropy_floor_ms(data: bytes, runs: int) -> float:
    """CPU p50 of decoding the JPEG at 1/8 scale: libjpeg still reads and Huffman-decodes every
    byte, but does almost nothing else. No bot that looks at the photo can spend less."""
    from PIL import Image

    samples = []
    for _ in range(runs + 2):
        cpu = time.process_time()
        with Image.open(io.BytesIO(data)) as image:
            image.draft("RGB", (image.size[0] // 8, image.size[1] // 8))
            image.load()
        samples.append((time.process_time() - cpu) * 1000)
    return percentile(samples[2:], 50)


async def latency(turns: int) -> None:
    from bot.app import App
    from bot.core.events import ImagePart, IncomingMessage
    from bot.ops.process import long_lived_heap

    photos = {"camera": camera_jpeg(5_000_000), "noise": noise_jpeg(5_000_000)}
    kinds = ("text", *photos)
    with fake_anthropic() as base_url:
        with long_lived_heap():   # as `myclaw run` starts
            app = await App.open(make_config(base_url))
        walls: dict[str, list[float]] = {k: [] for k in kinds}
        cpus: dict[str, list[float]] = {k: [] for k in kinds}
        in_workers: dict[str, list[float]] = {k: [] for k in kinds}
        for i in range(turns + 2):       # the first two of each are warm-up
            for kind in kinds:
                parts = (ImagePart(photos[kind], "image/jpeg", "photo.jpg"),) if kind in photos else ()
                message = IncomingMessage("cli:local", f"{kind}{i}", "what is this?", parts=parts)
                workers = workers_cpu_seconds()
                wall, cpu = time.perf_counter(), time.process_time()
                await app.agent.handle(message, NullSink())
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                if i >= 2:
                    walls[kind].append(wall * 1000)
                    workers = workers_cpu_seconds() - workers
                    cpus[kind].append((cpu + workers) * 1000)
                    in_workers[kind].append(workers * 1000)
        await app.close()
    print(f"media: photo turns vs text turns, {turns} each, each in a fresh conversation "
          "(photos scaled to at most 1568 px and 1.23 megapixels)")
    labels = {"text": "text turn", "camera": "photo turn: 12 MP camera-like JPEG",
              "noise": "photo turn: 3.6 MP noise JPEG (worst case per byte)"}
    for kind in kinds:
        size = f", {len(photos[kind]) / 1e6:.1f} MB" if kind in photos else ""
        print(f"  {labels[kind] + size:58} wall p50 {percentile(walls[kind], 50):7.1f} ms   "
              f"our CPU p50 {percentile(cpus[kind], 50):7.1f} ms "
              f"(workers {percentile(in_workers[kind], 50):.1f})")
    for kind in photos:
        added = percentile(cpus[kind], 50) - percentile(cpus["text"], 50)
        wall = percentile(walls[kind], 50) - percentile(walls["text"], 50)
        print(f"  added by the {kind} photo: our CPU {added:.1f} ms (target < {LATENCY_TARGET_MS:.0f} ms) "
              f"{'OK' if added < LATENCY_TARGET_MS else 'OVER TARGET'};   wall {wall:.1f} ms")
    for kind, photo in photos.items():
        least = entropy_floor_ms(photo, turns)
        print(f"  for comparison, the {kind} photo through Pillow's own thumbnail() (reduced-scale "
              f"decode, bicubic) and a JPEG encode: {pillow_floor_ms(photo, turns):.1f} ms of CPU; "
              f"only reading it (a 1/8-scale decode): {least:.1f} ms")
        beyond = percentile(cpus[kind], 50) - percentile(cpus["text"], 50) - least
        print(f"  the {kind} photo's turn beyond that 1/8-scale decode: {beyond:.1f} ms of our CPU "
              f"(target <= {BEYOND_DECODE_TARGET_MS:.0f} ms) "
              f"{'OK' if beyond <= BEYOND_DECODE_TARGET_MS else 'OVER TARGET'}")
    print(f"  (machine load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")


def peak_rss_mib(pid: int | str = "self") -> float:
    """A process's peak resident memory. Read from /proc (VmHWM) where it exists: ru_maxrss
    would include the parent's size inherited at fork."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # Linux: KiB


def reset_peak(pid: int | str = "self") -> None:
    """Start the peak over from the current size (Linux: "5" into clear_refs resets VmHWM)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def memory_probe(path: str) -> None:
    """Run in a fresh process: the peak RSS rise, here and in the workers, while a 20 MB photo
    becomes a stored reference and then a prompt block."""
    from bot.config import settings as config_mod

    tmp = Path(tempfile.mkdtemp(prefix="myclaw-bench-media-"))
    config = config_mod.from_dict({"agent": {"workspace": str(tmp / "ws")},
                                   "store": {"path": str(tmp / "db")}}, env={"HOME": str(tmp)})
    config.workspace.mkdir(parents=True)
    asyncio.run(_probe(config, Path(path).read_bytes()))


async def _probe(config: object, data: bytes) -> None:
    import PIL.Image  # imported before the baseline: code, not processing

    from bot.core.events import CollectingSink, ImagePart, IncomingMessage
    from bot.core.ports import Payer
    from bot.media.intake import MediaIntake
    from bot.money.gate import PaidCalls
    from bot.money.spend import SpendLedger
    from bot.store.sqlite import Store
    from bot.toolbox import offload

    async with Store(config.store_path) as store:
        intake = MediaIntake(config, store, PaidCalls(SpendLedger(store, None)))
        payer = Payer("cli:local", "full", "bench")
        # A small photo first: the workers start and import Pillow (code, not processing).
        warm = io.BytesIO()
        PIL.Image.new("RGB", (2000, 1500)).save(warm, "JPEG")
        for _ in range(offload.WORKERS * 2):
            await intake.user_content(IncomingMessage(
                "cli:local", "local", "", parts=(ImagePart(warm.getvalue(), "image/jpeg"),)),
                CollectingSink(), payer)
        message = IncomingMessage("cli:local", "local", "", parts=(ImagePart(data, "image/jpeg"),))
        processes = ["self", *descendants()]
        for pid in processes:
            reset_peak(pid)
        before = [peak_rss_mib(pid) for pid in processes]
        blocks = await intake.user_content(message, CollectingSink(), payer)
        prompt = await intake.expand([{"role": "user", "content": blocks}])
        rises = [peak_rss_mib(pid) - start for pid, start in zip(processes, before, strict=True)]
    offload.shutdown()
    image = prompt[0]["content"][1]
    print(f"{len(data)} {sum(rises):.1f} {len(image['source']['data'])} {rises[0]:.1f}")


def memory() -> None:
    with tempfile.NamedTemporaryFile(suffix=".jpg") as photo:
        photo.write(noise_jpeg(20_000_000))
        photo.flush()
        out = subprocess.run([sys.executable, __file__, "--memory-probe", photo.name], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    size, rise, encoded, here = int(out[0]), float(out[1]), int(out[2]), float(out[3])
    print(f"media: peak memory while processing a {size / 1e6:.1f} MB photo "
          f"(check, scale, inbox, store, prompt block of {encoded / 1e6:.2f} MB base64)")
    print(f"  peak RSS rise {rise:.1f} MiB (target < {MEMORY_TARGET_MIB:.0f} MiB) "
          f"{'OK' if rise < MEMORY_TARGET_MIB else 'OVER TARGET'}: {here:.1f} MiB in the bot's "
          f"process, {rise - here:.1f} MiB in its workers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--memory-probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_probe:
        memory_probe(args.memory_probe)
        return
    asyncio.run(latency(args.turns))
    memory()


if __name__ == "__main__":
    main()
