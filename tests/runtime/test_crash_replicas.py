"""A randomized crash run of two replicas: two real `myclaw run` processes in Telegram webhook
mode on one PostgreSQL schema, messages posted to either (a third of them delivered again to
the other, as Telegram re-sends an update it thinks was lost) — answers, and shell commands
whose approval requests are approved or denied by a tap posted to either replica (a third of
the taps delivered twice) — reminders coming due on the shared store, and at random moments one
replica — or both together — killed with SIGKILL and started again under its name (some while a
request waits for its tap; a quarter of the restarts killed again while starting: at once,
while it imports, or after its first Bot API calls). The invariants of
tests/support/crash_checks.py hold at the end: nothing lost (every message answered or its call
reported in doubt, every reminder delivered), no command run twice, the model told the truth, no
request left with its buttons. (A kill between sending an answer or a reminder and recording it
may repeat it once: more than twice fails the run.)

The seed is random unless CRASH_SEED is set; a failure prints it:
    CRASH_SEED=<seed> .venv/bin/pytest -q tests/runtime/test_crash_replicas.py
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import replace
from datetime import UTC, datetime

import aiohttp
import pytest

from bot.jobs.jobs import Job, Jobs
from bot.jobs.schedule import parse_at
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram
from tests.runtime.test_crash_random import crash_seed
from tests.support.crash_checks import check_invariants
from tests.support.crash_model import ScriptedModel
from tests.support.crashkit import approval_for, approve_data, observe
from tests.support.replica_support import (
    Poster,
    Replica,
    answers_by_chat,
    kill_hard,
    private_text,
    start_replica,
    start_replicas,
    stop_replicas,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(300)
CHATS = [6100 + n for n in range(4)]
MESSAGES = 24
REMINDERS = 6
KILLS = 4
DO_SHARE = 0.4      # messages asking for a shell command, which the full sender is asked to approve
DENY_SHARE = 0.2
START_KILL_SHARE = 0.25
START_KILL_CALLS = (0, 2)    # ...after this many Bot API calls seen since the restart began
SETTINGS = "[rate_limits]\nmessages_per_minute = 0\n[inbox]\nlease_seconds = 3\n"


class Cluster:
    def __init__(self, tmp, tg, fake, store_url, replicas: list[Replica], model: ScriptedModel):
        self.tmp, self.tg, self.fake, self.store_url = tmp, tg, fake, store_url
        self.replicas, self.model = replicas, model
        self.workspace = tmp / "workspace"   # the replicas' (tests/support/replica_support.py)
        self.senders = {f"telegram:{chat}": "full" for chat in CHATS}

    def up(self) -> list[Replica]:
        return [r for r in self.replicas if r.process.returncode is None]

    async def post(self, poster: Poster, update: dict, rng: random.Random) -> None:
        """To a random live replica; to the other when it refuses (the load balancer retries)."""
        while True:
            for replica in rng.sample(self.replicas, len(self.replicas)):
                if replica.process.returncode is not None:
                    continue
                try:
                    if await poster.post(replica, update) == 200:
                        return
                except aiohttp.ClientError:
                    continue
            await asyncio.sleep(0.2)   # both down: Telegram retries later

    async def post_maybe_twice(self, poster: Poster, update: dict, rng: random.Random) -> None:
        await self.post(poster, update, rng)
        if rng.random() < 1 / 3:
            await self.post(poster, update, rng)        # delivered again

    async def kill_some(self, rng: random.Random) -> None:
        """kill -9 one replica or both, and start them again."""
        dead = self.up() if rng.random() < 0.3 else [rng.choice(self.up())]
        for replica in dead:
            kill_hard(replica)
        await self.restart(dead, rng)

    async def answer_request(self, poster: Poster, token: str, chat: int,
                             rng: random.Random) -> None:
        """Wait for the request to run `token`'s command and tap Approve (or Deny)."""
        request = await eventually(lambda: approval_for(self.tg, chat, token),
                                   f"the request of {token}", 90)
        data = approve_data(request)
        assert data is not None
        choice = "d" if rng.random() < DENY_SHARE else "a"
        tap = {"callback_query": {"id": f"cq-{token}", "from": self.tg.user(chat),
                                  "chat_instance": "ci-1", "data": data[:-1] + choice,
                                  "message": request}}
        await self.post_maybe_twice(poster, poster.update(tap), rng)

    async def restart(self, dead: list[Replica], rng: random.Random) -> None:
        for replica in dead:
            await replica.process.wait()
            if rng.random() < START_KILL_SHARE:
                await self.kill_while_starting(replica, rng.randint(*START_KILL_CALLS))
            again = await self.start(replica, ready=True)
            self.replicas[self.replicas.index(replica)] = again

    async def start(self, replica: Replica, *, ready: bool) -> Replica:
        return await start_replica(
            self.tmp, replica.name, replica.port, tg=self.tg, anthropic_url=self.fake.base_url,
            store_url=self.store_url, senders=self.senders, extra=SETTINGS, ready=ready)

    async def kill_while_starting(self, replica: Replica, calls: int) -> None:
        """Start `replica` again and kill it once `calls` more Bot API calls were seen (0: at
        once, while it imports), or when it exits on its own."""
        seen = len(self.tg.calls)
        starting = await self.start(replica, ready=False)
        await eventually(lambda: len(self.tg.calls) >= seen + calls
                         or starting.process.returncode is not None,
                         "a moment to kill during start-up", timeout=120)
        kill_hard(starting)
        await starting.process.wait()


async def create_reminders(schema, rng: random.Random) -> list[tuple[str, int]]:
    made = []
    async with schema.store() as store:
        jobs = Jobs(store)
        for n in range(REMINDERS):
            chat = rng.choice(CHATS)
            now = time.time()
            due = parse_at(_iso(now + rng.uniform(3, 25)), now=now, timezone="UTC")
            await jobs.create(Job(id="", owner=f"telegram:{chat}", channel="telegram",
                                  chat=str(chat), name=f"r{n}", schedule=due, level="full",
                                  message=f"reminder r{n}"))
            made.append((f"r{n}", chat))
    return made


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds")


async def test_two_replicas_killed_at_random_lose_no_message_and_no_reminder(tmp_path, pg_schema):
    seed = crash_seed()
    rng = random.Random(seed)
    await pg_schema.empty()
    async with FakeTelegram() as tg, FakeAnthropic() as fake:
        model = ScriptedModel()
        fake.responder = model
        cluster = Cluster(tmp_path, tg, fake, pg_schema.store_url, [], model)
        cluster.replicas = await start_replicas(
            tmp_path, count=2, tg=tg, anthropic_url=fake.base_url, store_url=pg_schema.store_url,
            senders=cluster.senders, extra=SETTINGS)
        sent: dict[str, tuple[int, int, str]] = {}
        workspace = cluster.workspace
        try:
            reminders = await create_reminders(pg_schema, rng)
            await drive(cluster, rng, sent)
            await eventually(lambda: all(observe(tg, model, sent, workspace).settled(t)
                                         for t in sent)
                             and all(reminded(tg, n, c) for n, c in reminders),
                             "every message answered or reported and every reminder delivered",
                             120)
            await stop_replicas(cluster.replicas)
            seen = replace(observe(tg, model, sent, workspace), reminders=frozenset(reminders))
            problems = check_invariants(seen)
            problems += [f"{t} answered {len(seen.answers(t))} times" for t in sent
                         if len(seen.answers(t)) > 2]
            problems += [f"reminder {n} sent {reminded(tg, n, c)} times" for n, c in reminders
                         if reminded(tg, n, c) > 2]
            assert not problems, "\n".join(problems)
        except Exception as exc:
            logs = "\n".join(r.log.read_text(errors="replace")[-3000:] for r in cluster.replicas)
            raise AssertionError(f"replica crash run failed with CRASH_SEED={seed}: {exc}\n"
                                 f"{observe(tg, model, sent, workspace).transcript()}\n"
                                 f"{logs}") from exc
        finally:
            await stop_replicas(cluster.replicas)


def reminded(tg, name: str, chat: int) -> int:
    return sum(1 for text in answers_by_chat(tg).get(chat, [])
               if text.startswith("⏰") and f"reminder {name}" in text)


async def drive(cluster: Cluster, rng: random.Random,
                sent: dict[str, tuple[int, int, str]]) -> None:
    """Post the messages, some twice; approve or deny each request, the tap posted to either
    replica (some twice); kill one replica or both at random moments between, and some while
    a request waits for its tap."""
    kills_at = set(rng.sample(range(2, MESSAGES - 2), KILLS))
    async with Poster() as poster:
        for n in range(MESSAGES):
            chat, token = rng.choice(CHATS), f"t{n}"
            verb = "do" if rng.random() < DO_SHARE else "say"
            body = private_text(cluster.tg, chat, f"{verb} {token}")
            sent[token] = (chat, body["message"]["message_id"], verb)
            await cluster.post_maybe_twice(poster, poster.update(body), rng)
            kill = n in kills_at
            if verb == "do":
                if kill and rng.random() < 0.5:    # while the request waits for its tap
                    await cluster.kill_some(rng)
                    kill = False
                await cluster.answer_request(poster, token, chat, rng)
                # The next message waits for the answer: one written right after a tap, taken
                # by the other replica, would race the call's own answer (README, known limits).
                await eventually(lambda t=token: observe(cluster.tg, cluster.model, sent,
                                                         cluster.workspace).settled(t),
                                 f"{token} to be answered or reported", 90)
            if kill:
                await cluster.kill_some(rng)
