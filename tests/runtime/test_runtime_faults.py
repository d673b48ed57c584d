"""Faults: API errors, a process killed mid-turn, broken history — nothing is lost."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from bot.conversation import history
from bot.core.events import CollectingSink, ErrorEvent, IncomingMessage
from tests.fakes.anthropic_server import FakeAnthropic, error, text, tool_use
from tests.support.store_support import append


def message(text_: str) -> IncomingMessage:
    return IncomingMessage(sender="cli:local", chat="local", text=text_)


async def say(app, text_: str) -> CollectingSink:
    sink = CollectingSink()
    await app.agent.handle(message(text_), sink)
    return sink


async def test_a_rate_limit_is_retried_and_the_turn_succeeds(app_factory, fake_anthropic):
    app = await app_factory({"agent": {"llm_max_retries": 2}})
    fake_anthropic.script(error(429, "rate_limit_error", "slow down"), text("made it"))
    sink = await say(app, "hi")
    assert sink.text == "made it" and sink.of(ErrorEvent) == []
    assert len(fake_anthropic.requests) == 2


async def test_repeated_server_errors_give_one_clear_line_and_lose_nothing(app_factory, fake_anthropic):
    app = await app_factory({"agent": {"llm_max_retries": 2}})
    fake_anthropic.script(*[error(500, "api_error", "boom")] * 3)
    sink = await say(app, "remember this question")
    (failure,) = sink.of(ErrorEvent)
    assert "try again" in failure.message and "\n" not in failure.message
    assert len(fake_anthropic.requests) == 3
    fake_anthropic.script(text("now it works"))
    assert (await say(app, "and now?")).text == "now it works"
    texts = [b["text"] for b in fake_anthropic.last_request.json["messages"][0]["content"]]
    assert texts == ["remember this question", "and now?"]


async def test_an_unknown_model_names_the_setting_to_fix(app_factory, fake_anthropic):
    app = await app_factory({"agent": {"model": "claude-nonexistent-1"}})
    fake_anthropic.unknown_models.add("claude-nonexistent-1")
    (failure,) = (await say(app, "hi")).of(ErrorEvent)
    assert "[agent] model" in failure.message and "claude-nonexistent-1" in failure.message


async def test_a_rejected_key_names_the_variable_to_fix(app_factory, fake_anthropic):
    app = await app_factory()
    fake_anthropic.script(error(401, "authentication_error", "invalid x-api-key"))
    (failure,) = (await say(app, "hi")).of(ErrorEvent)
    assert "ANTHROPIC_API_KEY" in failure.message


async def test_history_left_with_an_unanswered_tool_use_is_repaired(app_factory, fake_anthropic):
    app = await app_factory()
    session = await app.agent.session_id(message("x"))
    await append(app.services.store, session, [
        {"role": "user", "content": [{"type": "text", "text": "before the crash"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_lost",
                                           "name": "time_now", "input": {}}]},
    ])
    assert (await say(app, "after the crash")).text == "ok: after the crash"
    sent = fake_anthropic.last_request.json["messages"]
    assert sent[2]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_lost",
                                     "is_error": True, "content": history.INTERRUPTED}
    assert sent[2]["content"][1]["text"] == "after the crash"


CRASHING_TURN = textwrap.dedent("""
    import asyncio, sys
    sys.path.insert(0, {root!r})
    from bot.config import settings as config_mod
    from bot.app import App
    from bot.core.events import IncomingMessage, CollectingSink, ToolStarted
    from tests.support.runtime_tools import Blocker

    class Announce(CollectingSink):
        async def emit(self, event):
            if isinstance(event, ToolStarted):
                print("TOOL STARTED", flush=True)

    async def main():
        app = await App.open(config_mod.from_dict({raw!r}, env={env!r}))
        app.services.registry.register(Blocker(), "tests")
        await app.agent.handle(IncomingMessage("cli:local", "local", "block please"), Announce())
    asyncio.run(main())
""")


async def test_a_process_killed_mid_tool_is_recovered_by_the_next_process_and_never_merged(
        tmp_path: Path):
    async with FakeAnthropic() as fake:
        fake.script(tool_use("blocker", {}))
        raw = {"agent": {"workspace": str(tmp_path / "ws"), "llm_max_retries": 0},
               "store": {"path": str(tmp_path / "db" / "myclaw.db")}}
        env = {"HOME": str(tmp_path), "ANTHROPIC_API_KEY": "test-key",
               "ANTHROPIC_BASE_URL": fake.base_url}
        script = CRASHING_TURN.format(root=str(Path.cwd()), raw=raw, env=env)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line.strip() == b"TOOL STARTED"
        os.kill(proc.pid, signal.SIGKILL)
        await proc.wait()

        from bot.app import App
        from bot.config import settings as config_mod

        app = await App.open(config_mod.from_dict(raw, env=env))
        try:
            # The blocking call has no side effects, so it was not written ahead: the turn is
            # taken up from the stored message and the model asked again.
            fake.script(text("resumed"), text("fresh start"))
            assert await app.recover() == 1
            await app.agent.queue.drain(10)
            resumed = fake.last_request.json["messages"]
            assert [m["role"] for m in resumed] == ["user"]
            assert resumed[0]["content"][0]["text"] == "block please"
            assert (await say(app, "are you there?")).text == "fresh start"
            users = [m["content"] for m in fake.last_request.json["messages"]
                     if m["role"] == "user"]
            assert [b.get("text") for b in users[0]] == ["block please"]
            assert [b.get("text") for b in users[-1]] == ["are you there?"]
        finally:
            await app.close()


async def test_a_tool_crash_becomes_an_unknown_error_without_traceback(app_factory, fake_anthropic):
    from bot.core.tool import BaseTool, ToolMeta

    class Broken(BaseTool):
        meta = ToolMeta(name="broken", description="Always fails.", risk="low",
                        schema={"type": "object", "properties": {}, "additionalProperties": False},
                        has_side_effects=False, returns_untrusted=False, capability_required="t")

        async def execute(self, ctx, **args):
            raise KeyError("internal detail")

    app = await app_factory()
    app.services.registry.register(Broken(), "tests")
    fake_anthropic.script(tool_use("broken", {}), text("it failed"))
    assert (await say(app, "go")).text == "it failed"
    result = fake_anthropic.last_request.json["messages"][-1]["content"][0]
    assert result["is_error"] and result["content"].startswith("unknown:")
    assert "Traceback" not in result["content"] and "internal detail" not in result["content"]


async def test_concurrent_llm_calls_beyond_the_limit_queue_instead_of_failing(app_factory,
                                                                              fake_anthropic):
    senders = {f"telegram:{i}": "full" for i in range(6)}
    app = await app_factory({"agent": {"max_concurrent_llm_calls": 2}, "senders": senders})
    fake_anthropic.delay = 0.05
    sinks = [CollectingSink() for _ in senders]
    await asyncio.gather(*(app.agent.handle(IncomingMessage(s, s[9:], "hi", "telegram"), sink)
                           for s, sink in zip(senders, sinks, strict=True)))
    assert all(s.text == "ok: hi" for s in sinks)
    starts = sorted(r.time for r in fake_anthropic.requests)
    assert len(starts) == 6
    # With two calls in flight at most, the third call cannot start before one of the first
    # two (each held 0.05 s by the fake) has finished.
    assert starts[2] - starts[0] >= 0.04


async def test_after_a_failed_turn_every_later_request_keeps_alternating_roles(app_factory,
                                                                               fake_anthropic):
    app = await app_factory({"agent": {"llm_max_retries": 0}})
    fake_anthropic.script(error(500, "api_error", "boom"))
    await say(app, "first")
    for text_ in ("second", "third", "fourth"):
        await say(app, text_)
        roles = [m["role"] for m in fake_anthropic.last_request.json["messages"]]
        assert all(a != b for a, b in itertools.pairwise(roles)), roles
    first = fake_anthropic.last_request.json["messages"][0]["content"]
    assert [b["text"] for b in first] == ["first", "second"]
