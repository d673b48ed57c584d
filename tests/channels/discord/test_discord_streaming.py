"""Live answers on Discord: the real discord.py against the fake REST and gateway, with a
scripted stand-in for the agent that emits the answer delta by delta and waits on the wire (the
fake's requests) between them. Time is an injected clock: each message is edited at most once
per interval by that clock, a long answer continues in follow-up messages in order, tool
progress is a status line, a 429 is waited out by discord.py, and the final text is the model's
answer, whole, even when an edit is refused."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from bot.core.events import Done, TextDelta, ToolFinished, ToolProgress, ToolStarted
from channels.discord.channel import DiscordChannel
from channels.discord.live import CURSOR, StreamSettings
from tests.conftest import make_config
from tests.fakes.discord_server import FakeDiscord
from tests.support.languages import EN

USER = 4_300_000_000_000_001
USER_DM = 6_100_000_000_000_001
INTERVAL = 1.2


class SteppedClock:
    """Time that moves only when the streamer waits: a wait of d seconds is d seconds later."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)
        await asyncio.sleep(0)


class StreamingAgent:
    """Plays `steps` into the sink: an event is emitted, a coroutine function is awaited."""

    inbox = None

    def __init__(self, *steps):
        self.steps = steps

    async def handle(self, message, sink):
        for step in self.steps:
            if step is asyncio.sleep:
                await asyncio.sleep(0)
            elif callable(step):
                await step()
            else:
                await sink.emit(step)

    async def set_approval_message_ref(self, approval_id, ref, channel=""):
        pass

    async def pending_approvals(self, channel):
        return []

    def command_descriptions(self, language=""):
        return []

    def translator(self, reader, hint=""):
        return EN


@pytest.fixture
async def discord_fake():
    async with FakeDiscord() as fake:
        with fake.patched():
            yield fake


@pytest.fixture
def clock(discord_fake):
    stepped = SteppedClock()
    discord_fake.clock = stepped
    return stepped


@pytest.fixture
async def start(tmp_path, discord_fake, clock):
    started = []

    async def starter(agent):
        config = make_config(tmp_path, {"discord": {"guild_ready_timeout": 0.05}},
                             env={"DISCORD_BOT_TOKEN": discord_fake.token})
        channel = DiscordChannel(config, agent, StreamSettings(interval=INTERVAL, first_delay=0.3,
                                                               clock=clock, sleep=clock.sleep))
        started.append(channel)
        await channel.start()
        return channel

    yield starter
    for channel in reversed(started):
        await channel.stop()


def edits(fake, message_id) -> list:
    return fake.requests_to("PATCH", f"/channels/{USER_DM}/messages/{message_id}")


def posts(fake) -> list:
    return fake.requests_to("POST", f"/channels/{USER_DM}/messages")


def wire(fake, predicate):
    async def wait() -> None:
        await fake.wait_for(predicate)
    return wait


async def ask(discord_fake, content: str = "tell me") -> None:
    await discord_fake.send_message(author_id=USER, content=content, channel_id=USER_DM)


async def test_an_answer_is_shown_as_written_in_one_message_edited_at_most_once_per_interval(
        start, discord_fake):
    words = [f"word{i} " for i in range(12)]
    answer = "".join(words)
    steps = [TextDelta(words[0]), wire(discord_fake, lambda: posts(discord_fake))]
    for n, word in enumerate(words[1:], start=1):
        steps += [TextDelta(word), wire(discord_fake, lambda n=n: sum(
            len(edits(discord_fake, m["id"])) for m in discord_fake.bot_messages(USER_DM)) >= n)]
    await start(StreamingAgent(*steps, Done(answer)))
    await ask(discord_fake)
    await discord_fake.wait_for_text(USER_DM, answer)
    (message,) = discord_fake.bot_messages(USER_DM)
    times = [r.at for r in edits(discord_fake, message["id"])]
    assert len(times) >= 11
    assert all(later - earlier >= INTERVAL - 1e-9 for earlier, later in itertools.pairwise(times))
    shown = [r.json["content"] for r in edits(discord_fake, message["id"])]
    assert shown[0] == "word0 word1" + CURSOR and shown[-1] == answer
    assert len(posts(discord_fake)) == 1


async def test_a_quick_answer_is_one_message_and_no_edit(start, discord_fake):
    await start(StreamingAgent(TextDelta("Hel"), TextDelta("lo."), Done("Hello.")))
    await ask(discord_fake)
    await discord_fake.wait_for_text(USER_DM, "Hello.")
    (message,) = discord_fake.bot_messages(USER_DM)
    assert edits(discord_fake, message["id"]) == [] and len(posts(discord_fake)) == 1


async def test_a_five_thousand_character_answer_continues_in_follow_up_messages_in_order(
        start, discord_fake):
    lines = [f"Line {i:03d}: " + "x" * 40 for i in range(100)]
    answer = "\n".join(lines)[:5000]
    pieces = [answer[i:i + 250] for i in range(0, len(answer), 250)]
    steps = [TextDelta(pieces[0]), wire(discord_fake, lambda: posts(discord_fake))]
    for piece in pieces[1:]:
        steps += [TextDelta(piece), asyncio.sleep]   # the streamer gets a turn between deltas
    await start(StreamingAgent(*steps, Done(answer)))
    await ask(discord_fake)
    await discord_fake.wait_for(lambda: "\n".join(
        m["content"] for m in discord_fake.bot_messages(USER_DM)) == answer)
    contents = [m["content"] for m in discord_fake.bot_messages(USER_DM)]
    assert len(contents) == 3 and all(len(c) <= 2000 for c in contents)
    assert contents[0].startswith("Line 000") and CURSOR not in "".join(contents)


async def test_tool_progress_is_a_status_line_between_the_text_before_and_the_answer(
        start, discord_fake):
    await start(StreamingAgent(
        TextDelta("Let me look."), ToolStarted("c1", "fs_read", {"path": "a"}),
        ToolProgress("c1", "fs_read", "half way"), ToolFinished("c1", "fs_read", True, "3 lines"),
        TextDelta("It has "), TextDelta("3 lines."), Done("It has 3 lines.")))
    await ask(discord_fake)
    await discord_fake.wait_for_text(USER_DM, "It has 3 lines.")
    await discord_fake.wait_for(lambda: "✅ `fs_read` — 3 lines" in [
        m["content"] for m in discord_fake.bot_messages(USER_DM)])   # its edit waits its turn
    posted = [m["content"] for m in discord_fake.bot_messages(USER_DM)]
    assert posted == ["Let me look.", "✅ `fs_read` — 3 lines", "It has 3 lines."]


async def test_a_429_on_an_edit_is_waited_out_by_discord_py_and_the_final_text_lands(
        start, discord_fake):
    discord_fake.rate_limit_edits = 1
    await start(StreamingAgent(
        TextDelta("First part"), wire(discord_fake, lambda: posts(discord_fake)),
        TextDelta(", second part"), Done("First part, second part, whole.")))
    await ask(discord_fake)
    await discord_fake.wait_for_text(USER_DM, "First part, second part, whole.")
    (message,) = discord_fake.bot_messages(USER_DM)
    tries = edits(discord_fake, message["id"])
    assert len(tries) >= 2 and tries[0].json == tries[1].json   # refused once, sent again
    assert tries[-1].json["content"] == "First part, second part, whole."
    assert discord_fake.rate_limit_edits == 0


async def test_a_message_that_can_no_longer_be_edited_still_gets_the_final_answer(
        start, discord_fake):
    async def deleted() -> None:
        discord_fake.messages.clear()   # the person deleted the streamed message
    await start(StreamingAgent(
        TextDelta("Draft"), wire(discord_fake, lambda: posts(discord_fake)), deleted,
        TextDelta(" and more"), Done("The final answer.")))
    await ask(discord_fake)
    await discord_fake.wait_for_text(USER_DM, "The final answer.")
    assert [m["content"] for m in discord_fake.bot_messages(USER_DM)] == ["The final answer."]


async def test_two_tools_in_one_step_edit_their_status_line_at_most_once_per_interval(
        start, discord_fake):
    await start(StreamingAgent(
        ToolStarted("c1", "fs_read", {"path": "a"}), ToolFinished("c1", "fs_read", True, "3 lines"),
        ToolStarted("c2", "fs_list", {"path": "."}), ToolProgress("c2", "fs_list", "half way"),
        ToolFinished("c2", "fs_list", True, "2 files"),
        TextDelta("Read and listed."), Done("Read and listed.")))
    await ask(discord_fake)
    await discord_fake.wait_for_text(USER_DM, "Read and listed.")
    status = discord_fake.bot_messages(USER_DM)[0]
    await discord_fake.wait_for(lambda: discord_fake.bot_messages(USER_DM)[0]["content"]
                                == "✅ `fs_list` — 2 files")   # its last edit waits its turn
    (posted,) = [r for r in posts(discord_fake) if r.json["content"].startswith("⚙️ `fs_read`")]
    times = [posted.at] + [r.at for r in edits(discord_fake, status["id"])]
    assert len(times) >= 2
    assert all(later - earlier >= INTERVAL - 1e-9 for earlier, later in itertools.pairwise(times))
    assert [m["content"] for m in discord_fake.bot_messages(USER_DM)] == [
        "✅ `fs_list` — 2 files", "Read and listed."]
