"""Real `myclaw run` replicas for the end-to-end replica test and bench/replicas.py: N processes
in Telegram webhook mode on one PostgreSQL schema, against a fake Telegram and a fake Anthropic,
with updates posted straight to each replica's webhook port (as a load balancer would).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
WEBHOOK_SECRET = "replica-webhook-secret_0123456789"
RECEIPT_KEY = "replica-receipt-key-0123456789abcdef0123456789abcdef"
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class Replica:
    name: str
    port: int
    process: asyncio.subprocess.Process
    log: Path

    @property
    def webhook(self) -> str:
        return f"http://127.0.0.1:{self.port}/telegram"


def config_text(tmp: Path, *, telegram_base: str, telegram_file_base: str, port: int,
                senders: dict[str, str], extra: str = "") -> str:
    lines = [
        "[agent]", f'workspace = "{tmp / "workspace"}"', "llm_max_retries = 0",
        "max_concurrent_llm_calls = 1000",
        "[store]", f'path = "{tmp / "unused.db"}"',
        "[senders]", *[f'"{sender}" = "{level}"' for sender, level in senders.items()],
        "[telegram]", f'base_url = "{telegram_base}"', f'base_file_url = "{telegram_file_base}"',
        'mode = "webhook"', 'webhook_url = "https://bot.example/telegram"',
        'listen = "127.0.0.1"', f"port = {port}",
    ]
    return "\n".join(lines) + "\n" + extra


async def start_replicas(tmp: Path, *, count: int, tg: Any, anthropic_url: str, store_url: str,
                         senders: dict[str, str], extra: str = "",
                         profile: bool = False) -> list[Replica]:
    """Start `count` replicas and return once each has registered its webhook. `profile`: each
    runs under cProfile, its statistics written to <tmp>/<name>.prof when it stops."""
    replicas = []
    for index in range(count):
        replicas.append(await start_replica(
            tmp, f"replica-{index + 1}", free_port(), tg=tg, anthropic_url=anthropic_url,
            store_url=store_url, senders=senders, extra=extra, profile=profile))
    return replicas


async def start_replica(tmp: Path, name: str, port: int, *, tg: Any, anthropic_url: str,
                        store_url: str, senders: dict[str, str], extra: str = "",
                        profile: bool = False, ready: bool = True) -> Replica:
    """Start (or start again: the same name and port) one replica; return once it has
    registered its webhook (`ready`), or at once, the process just spawned."""
    config = tmp / f"{name}.toml"
    config.write_text(config_text(tmp, telegram_base=tg.base_url,
                                  telegram_file_base=tg.base_file_url, port=port,
                                  senders=senders, extra=extra))
    config.chmod(0o600)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp),
           "PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": "sk-test-replicas",
           "ANTHROPIC_BASE_URL": anthropic_url, "TELEGRAM_BOT_TOKEN": tg.token,
           "TELEGRAM_WEBHOOK_SECRET": WEBHOOK_SECRET, "MYCLAW_RECEIPT_KEY": RECEIPT_KEY,
           # application_name: how the bench tells its replicas' connections apart
           "MYCLAW_DATABASE_URL": f"{store_url}&application_name=myclaw-{name}",
           "MYCLAW_REPLICA": name}
    log = tmp / f"{name}.log"
    profiler = ["-m", "cProfile", "-o", str(tmp / f"{name}.prof")] if profile else []
    webhooks = len(tg.of("setWebhook")) + 1
    with log.open("ab") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable, *profiler, "-m", "bot", "--config", str(config), "run", env=env,
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)
    replica = Replica(name, port, process, log)
    if ready:
        await _started(replica, tg, webhooks)
    return replica


async def _started(replica: Replica, tg: Any, webhooks: int) -> None:
    """Wait for the replica's setWebhook; a replica that exits first fails with its log."""
    registered = asyncio.create_task(tg.wait_for("setWebhook", count=webhooks,
                                                 timeout=START_TIMEOUT_S))
    exited = asyncio.create_task(replica.process.wait())
    done, _ = await asyncio.wait({registered, exited}, return_when=asyncio.FIRST_COMPLETED)
    registered.cancel()
    exited.cancel()
    if registered not in done or registered.cancelled() or registered.exception():
        tail = replica.log.read_text(errors="replace")[-3000:]
        raise AssertionError(f"{replica.name} did not start; its log ends:\n{tail}")


async def stop_replicas(replicas: list[Replica]) -> None:
    for replica in replicas:
        if replica.process.returncode is None:
            replica.process.send_signal(signal.SIGTERM)
    for replica in replicas:
        try:
            await asyncio.wait_for(replica.process.wait(), 30)
        except TimeoutError:
            replica.process.kill()
            await replica.process.wait()


def kill_hard(replica: Replica) -> None:
    """kill -9: no shutdown, no cleanup, leases left as they were."""
    replica.process.send_signal(signal.SIGKILL)


class Poster:
    """Posts updates to chosen replicas with the webhook secret, as Telegram through a load
    balancer would (Telegram retries what is not answered 200)."""

    def __init__(self, first_update_id: int = 1):
        self._ids = itertools.count(first_update_id)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Poster:
        self._session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    def update(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"update_id": next(self._ids), **body}

    async def post(self, replica: Replica, update: dict[str, Any]) -> int:
        assert self._session is not None
        async with self._session.post(
                replica.webhook, json=update,
                headers={"X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET}) as response:
            return response.status


def private_text(tg: Any, user_id: int, text: str) -> dict[str, Any]:
    chat = {"id": user_id, "type": "private", "first_name": "Ada"}
    return {"message": tg.make_message(chat, user_id, text)}


def answers_by_chat(tg: Any) -> dict[int, list[str]]:
    """The bot's messages per chat as they read now (after edits), in the order they were sent."""
    out: dict[int, list[str]] = {}
    for (chat, _), message in sorted(tg.messages.items(), key=lambda item: item[0][1]):
        out.setdefault(int(chat), []).append(str(message.get("text", "")))
    return out


def cpu_seconds(replica: Replica) -> float:
    """The CPU time (user + system) the replica's process has used so far (Linux)."""
    fields = Path(f"/proc/{replica.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
