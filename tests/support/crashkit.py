"""What the crash tests share: a real `myclaw run` process against the fake Telegram and the fake
Anthropic, killed with SIGKILL at a chosen point and restarted on the same store.

    async with crash_kit(tmp_path, backend) as kit:
        await kit.start()
        token = kit.send(kit.chats[0], "say")          # "say t1" from the chat's user
        await kit.kill()                               # SIGKILL, then the next start
        await kit.start()
        await kit.settled(token)
        await kit.finish()                             # SIGTERM, then every invariant

Points are chosen with the fakes (a held Bot API call, a held model call, a shell command
blocked on a FIFO) or with the store (its write lock held by the test, so nothing can be
stored); nothing in the bot knows it is being tested. The invariants are in tests/support/crash_checks.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram
from tests.support.crash_checks import Observed, check_invariants
from tests.support.crash_model import EFFECTS, ScriptedModel, asks_about
from tests.support.crash_store import StoreProbe
from tests.support.waiting import SETTLE_TIMEOUT_S, eventually

ROOT = Path(__file__).resolve().parents[2]
FIRST_USER = 1001
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Backend:
    """Where the bot keeps its state: `name` is "sqlite" or "postgresql"; `env` selects it."""

    name: str
    env: dict[str, str]
    pg_schema: str | None = None
    pg_url: str | None = None


class BotProcess:
    """One `myclaw run` at a time; its stderr goes to numbered log files for failure reports."""

    def __init__(self, tmp_path: Path, env: dict[str, str]):
        self._tmp = tmp_path
        self._env = env
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0
        self.kills = 0
        self._up_for = 0.0                  # seconds some process was running and ready...
        self._up_since: float | None = None  # ...and since when the current one is

    def uptime(self) -> float:
        """Seconds a ready bot was running so far: what a deadline for an answer counts (a
        restart's import and start-up, slow on a loaded machine, are not the bot's to answer in)."""
        now = asyncio.get_running_loop().time()
        return self._up_for + (now - self._up_since if self._up_since is not None else 0.0)

    async def start(self, tg: FakeTelegram, *, wait: bool = True) -> None:
        """Spawn `myclaw run`; with `wait`, return once it polls (it is ready)."""
        assert self.proc is None, "the bot is already running"
        polls = len(tg.of("getUpdates"))
        self.starts += 1
        log = (self._tmp / f"bot-{self.starts}.log").open("wb")
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", "run", env=self._env, cwd=ROOT,
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        finally:
            log.close()   # the child has its own copy
        if not wait:
            return
        try:
            await tg.wait_for("getUpdates", count=polls + 1, timeout=START_TIMEOUT_S)
        except AssertionError as exc:
            await self.dump_stacks()
            raise AssertionError(f"myclaw run did not start polling:\n{self.logs()}") from exc
        self._up_since = asyncio.get_running_loop().time()

    def _went_down(self) -> None:
        self._up_for = self.uptime()
        self._up_since = None

    async def kill(self) -> None:
        self._went_down()
        proc, self.proc = self.proc, None
        assert proc is not None, "the bot is not running"
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGKILL)
        await proc.wait()
        self.kills += 1

    async def stop(self) -> None:
        """SIGTERM: the graceful path; it must end cleanly."""
        self._went_down()
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 60)
        assert code == 0, f"myclaw run ended with {code} after SIGTERM:\n{self.logs()}"

    async def dump_stacks(self) -> None:
        """A process still running when a test fails: SIGABRT, so faulthandler writes every
        thread's Python stack into its log (where it hung), and it ends."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGABRT)
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        if self.proc is proc:   # (a kill meanwhile, from another task, already let it go)
            self._went_down()
            self.proc = None

    def logs(self, tail: int = 4000) -> str:
        parts = []
        for number in range(1, self.starts + 1):
            path = self._tmp / f"bot-{number}.log"
            if path.exists():
                parts.append(f"--- start {number} ---\n{path.read_text(errors='replace')[-tail:]}")
        return "\n".join(parts)


class Kit:
    """Fakes, the scripted model, the bot process, the store probe and what the test sent."""

    def __init__(self, tmp_path: Path, backend: Backend, tg: FakeTelegram, fake: FakeAnthropic,
                 chats: int):
        self.tmp = tmp_path
        self.backend = backend
        self.tg = tg
        self.fake = fake
        self.model = ScriptedModel()
        fake.responder = self.model
        self.chats = [FIRST_USER + n for n in range(chats)]
        self.workspace = tmp_path / "ws"
        self.workspace.mkdir(parents=True, exist_ok=True)
        (tmp_path / "data").mkdir(exist_ok=True)
        self.config = self._write_config()
        self.env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT),
                    "MYCLAW_CONFIG": str(self.config), "ANTHROPIC_API_KEY": "test",
                    "ANTHROPIC_BASE_URL": fake.base_url, "TELEGRAM_BOT_TOKEN": tg.token,
                    # Named, as an operator names a replica: the restarted process is the same
                    # replica and takes up its own unfinished work at once (on PostgreSQL an
                    # unnamed one is a new replica that waits for the old claims to lapse).
                    "MYCLAW_REPLICA": "crash-test",
                    # A failure report shows a live process's stacks (BotProcess.dump_stacks).
                    "PYTHONFAULTHANDLER": "1", **backend.env}
        self.bot = BotProcess(tmp_path, self.env)
        self.store = StoreProbe(backend, tmp_path / "data" / "myclaw.db")
        self.sent: dict[str, tuple[int, int, str]] = {}   # token -> (chat, message id, verb)
        self._tokens = 0
        self._tapped: set[str] = set()   # requests answered once already

    def _write_config(self) -> Path:
        senders = "".join(f'"telegram:{chat}" = "full"\n' for chat in self.chats)
        path = self.tmp / "myclaw.toml"
        path.write_text(
            f'[agent]\nworkspace = "{self.workspace}"\nllm_max_retries = 0\n'
            "shutdown_grace_seconds = 10\n"
            f'[store]\npath = "{self.tmp / "data" / "myclaw.db"}"\n'
            f"[senders]\n{senders}"
            "[rate_limits]\nmessages_per_minute = 0\n"
            "[approvals]\nnotify_approvers = false\n"
            f'[telegram]\nbase_url = "{self.tg.base_url}"\n'
            f'base_file_url = "{self.tg.base_file_url}"\n')
        path.chmod(0o600)
        return path

    # --- driving ----------------------------------------------------------------------------

    async def start(self, *, wait: bool = True) -> None:
        await self.bot.start(self.tg, wait=wait)

    async def kill(self) -> None:
        await self.bot.kill()

    def send(self, chat: int, verb: str) -> str:
        """The chat's user writes "<verb> <token>"; returns the new token."""
        self._tokens += 1
        token = f"t{self._tokens}"
        if verb == "hang":
            os.mkfifo(self.workspace / f"{token}.fifo")
        message = self.tg.private_message(chat, f"{verb} {token}")
        self.sent[token] = (chat, message["message_id"], verb)
        return token

    def approval_for(self, token: str) -> dict[str, Any] | None:
        """The request message (with its buttons still on) asking to run `token`'s command."""
        return approval_for(self.tg, self.sent[token][0], token)

    def tap(self, token: str, message: dict[str, Any], choice: str = "a") -> None:
        data = approve_data(message)
        assert data is not None
        self._tapped.add(data)
        self.tg.tap(self.sent[token][0], data[:-1] + choice, message)

    def asked(self, token: str) -> int:
        """How many model calls had `token`'s message as the one to answer (turns started)."""
        return sum(1 for r in self.fake.requests if r.json and asks_about(r.json) == token)

    def observed(self) -> Observed:
        return observe(self.tg, self.model, self.sent, self.workspace)

    async def stored_reminders(self) -> frozenset[tuple[str, int]]:
        """(name, chat) of every reminder job in the store, whatever its status."""
        rows = await self.store.rows("SELECT name, chat FROM jobs WHERE message <> ''")
        return frozenset((str(name), int(chat)) for name, chat in rows)

    async def stored_jobs(self) -> frozenset[tuple[str, int]]:
        """(name, chat) of every other job in the store (a turn of its own when it runs)."""
        rows = await self.store.rows("SELECT name, chat FROM jobs WHERE message = ''")
        return frozenset((str(name), int(chat)) for name, chat in rows)

    async def all_reminded(self, timeout: float = 60) -> None:
        """Wait until every stored reminder reached its chat and every other job's run finished
        there or was reported (the bot must be running)."""
        async def delivered() -> bool:
            seen = self.observed()
            return all(seen.reminded(name, chat) for name, chat in await self.stored_reminders()) \
                and all(seen.finished(name, chat) or seen.job_reported(name, chat)
                        for name, chat in await self.stored_jobs())
        try:
            await eventually(delivered, "every stored reminder and job run to reach its chat",
                             timeout)
        except AssertionError as exc:
            await self.bot.dump_stacks()
            raise AssertionError(f"{exc}\n{self.transcript()}\n{await self.store.dump()}\n"
                                 f"{self.bot.logs()}") from exc

    def effects(self) -> list[str]:
        return effects_in(self.workspace)

    async def approve(self, token: str) -> None:
        """Wait for the request to run `token`'s command and tap Approve."""
        request = await eventually(lambda: self.approval_for(token), f"the request of {token}")
        self.tap(token, request)

    async def settled(self, token: str, choice: str = "a",
                      timeout: float = SETTLE_TIMEOUT_S) -> None:
        """Wait until `token` is answered or reported, answering its request (once) with
        `choice` ("a" approve, "d" deny): within `timeout` seconds of a ready bot running (up
        time, however many restarts lie between), and at most ten times that on the wall clock."""
        def done() -> bool:
            request = self.approval_for(token)
            if request is not None and approve_data(request) not in self._tapped:
                self.tap(token, request, choice)
            return self.observed().settled(token)
        deadline = self.bot.uptime() + timeout
        try:
            await eventually(lambda: done() or self.bot.uptime() > deadline,
                             f"{token} to be answered or reported", timeout * 10)
            if not done():
                raise AssertionError(f"{token} was not answered or reported within {timeout:.0f}s "
                                     f"of the bot running ({self.bot.starts} starts so far)")
        except AssertionError as exc:
            await self.bot.dump_stacks()
            raise AssertionError(f"{exc}\n{self.transcript()}\n{await self.store.dump()}\n"
                                 f"{self.bot.logs()}") from exc

    def transcript(self) -> str:
        return self.observed().transcript()

    async def finish(self) -> None:
        """The graceful stop, then every invariant (tests/support/crash_checks.py)."""
        await self.bot.stop()
        verified = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "bot", "receipts", "verify"], env=self.env,
            cwd=ROOT, capture_output=True, text=True, timeout=120)
        stuck = await self.store.stuck_approvals()
        problems = check_invariants(replace(self.observed(),
                                            reminders=await self.stored_reminders(),
                                            jobs=await self.stored_jobs()))
        if verified.returncode != 0:
            problems.append(f"receipts verify failed: {verified.stdout}{verified.stderr}")
        if stuck:
            problems.append(f"approvals left approved but not finished: {stuck}")
        assert not problems, "\n".join(problems) + (
            f"\n{self.transcript()}\n{await self.store.dump()}\n{self.bot.logs()}")


def observe(tg: FakeTelegram, model: ScriptedModel, sent: dict[str, tuple[int, int, str]],
            workspace: Path) -> Observed:
    """What the fakes saw of the run so far (the invariants' input)."""
    requests = frozenset((int(c.params["chat_id"]), c.result["message_id"])
                         for c in tg.cards(lambda p: "ap:" in str(p.get("reply_markup"))))
    return Observed(sent=dict(sent), messages=dict(tg.messages), effects=effects_in(workspace),
                    shown=list(model.shown), requests=requests)


def effects_in(workspace: Path) -> list[str]:
    path = workspace / EFFECTS
    return path.read_text().split() if path.exists() else []


def approval_for(tg: FakeTelegram, chat: int, token: str) -> dict[str, Any] | None:
    """The request message in `chat` (with its buttons still on) asking to run `token`'s
    command."""
    for (where, _), message in sorted(tg.messages.items()):
        if where == chat and approve_data(message) and f"echo {token} " in message["text"]:
            return message
    return None


def approve_data(message: dict[str, Any]) -> str | None:
    """The callback data of the message's Approve button (None: it has none)."""
    for row in (message.get("reply_markup") or {}).get("inline_keyboard", []):
        for button in row:
            data = button.get("callback_data") or ""
            if data.startswith("ap:") and data.endswith(":a"):
                return data
    return None


@contextlib.asynccontextmanager
async def crash_kit(tmp_path: Path, backend: Backend, chats: int = 1) -> AsyncIterator[Kit]:
    # A token of its own: on PostgreSQL the one-poller lock is keyed by the token, database-wide.
    token = f"{secrets.randbelow(10**9) + 10**8}:CRASH-{secrets.token_hex(8)}"
    async with FakeTelegram(token=token) as tg, FakeAnthropic() as fake:
        kit = Kit(tmp_path, backend, tg, fake, chats)
        try:
            yield kit
        finally:
            if kit.bot.proc is not None:
                await kit.bot.kill()
            kit.model.release_all()


async def backend_of(schema: Any) -> Backend:
    """The backend for a test given `_pg_schema_if_needed` (None: SQLite); PostgreSQL's schema is
    emptied first, as the store fixtures do."""
    if schema is None:
        return Backend("sqlite", {})
    await schema.empty()
    return Backend("postgresql", {"MYCLAW_DATABASE_URL": schema.store_url}, schema.name, schema.url)
