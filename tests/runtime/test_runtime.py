"""The agent loop end to end: real runtime, real SDK, fake Anthropic on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from bot.core.events import (
    CollectingSink,
    Done,
    IncomingMessage,
    Notice,
    TextDelta,
    ToolFinished,
    ToolStarted,
)
from tests.fakes import EVENTUALLY
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.support.pg_support import on_both_backends
from tests.support.providers import PROVIDERS, is_error_text, model_id, tool_result_texts
from tests.support.runtime_tools import Blocker, Hostile, Recorder

# Whole turns on each store: history, usage, audit and receipts written and read back.
backend_name = on_both_backends()


def message(text_: str, sender: str = "cli:local", chat: str = "local") -> IncomingMessage:
    return IncomingMessage(sender=sender, chat=chat, text=text_, channel=sender.partition(":")[0])


async def say(app, text_: str, **kwargs) -> CollectingSink:
    sink = CollectingSink()
    await app.agent.handle(message(text_, **kwargs), sink)
    return sink


def results_of(request) -> list[dict]:
    return [b for m in request.json["messages"] if m["role"] == "user"
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]


@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_a_turn_with_two_tool_calls_runs_both_and_answers(app_factory, fake_model):
    app = await app_factory()
    recorder = Recorder()
    app.services.registry.register(recorder, "tests")
    fake_model.script(
        reply(text("Let me record."), tool_use("recorder", {"value": "a"}),
              tool_use("recorder", {"value": "b"})),
        text("Recorded both."))
    sink = await say(app, "record a and b")
    assert sorted(c["value"] for c in recorder.calls) == ["a", "b"]
    assert sink.text == "Recorded both."
    assert "".join(e.text for e in sink.of(TextDelta)) == "Let me record.Recorded both."
    assert [e.tool for e in sink.of(ToolStarted)] == ["recorder", "recorder"]
    results = tool_result_texts(fake_model, fake_model.requests[1])
    assert len(results) == 2 and not any(is_error_text(r) for r in results)
    assert {json.loads(r)["recorded"] for r in results} == {"a", "b"}


@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_invalid_args_reach_the_model_as_a_structured_error_and_not_the_tool(app_factory,
                                                                                   fake_model):
    app = await app_factory()
    recorder = Recorder()
    app.services.registry.register(recorder, "tests")
    fake_model.script(tool_use("recorder", {"value": 3, "extra": True}), text("sorry"))
    await say(app, "go")
    assert recorder.calls == []
    (result,) = tool_result_texts(fake_model, fake_model.requests[1])
    assert result.startswith("invalid_args: recorder: invalid arguments")
    assert "Hint:" in result


async def test_an_unknown_tool_gets_a_did_you_mean_hint(app_factory, fake_anthropic):
    app = await app_factory()
    app.services.registry.register(Recorder(), "tests")
    fake_anthropic.script(tool_use("recordr", {"value": "x"}), text("ok"))
    await say(app, "go")
    (result,) = results_of(fake_anthropic.requests[1])
    assert result["is_error"] is True
    assert "Unknown tool 'recordr'" in result["content"]
    assert "Did you mean recorder?" in result["content"]


async def test_a_tool_hidden_from_the_sender_is_refused_even_when_called_by_name(app_factory,
                                                                                 fake_anthropic):
    app = await app_factory({"senders": {"telegram:7": "full"}})
    secret = Recorder("terminal_only", cli_only=True)
    app.services.registry.register(secret, "tests")
    fake_anthropic.script(tool_use("terminal_only", {"value": "x"}), text("ok"))
    await say(app, "go", sender="telegram:7", chat="7")
    catalog = [t["name"] for t in fake_anthropic.requests[0].json.get("tools", [])]
    assert "terminal_only" not in catalog
    assert secret.calls == []
    (result,) = results_of(fake_anthropic.requests[1])
    assert result["content"].startswith("permission_denied:")


async def test_untrusted_output_cannot_close_or_forge_its_wrapper(app_factory, fake_anthropic):
    app = await app_factory()
    app.services.registry.register(Hostile(), "tests")
    fake_anthropic.script(tool_use("hostile", {}), text("done"))
    await say(app, "fetch")
    (result,) = results_of(fake_anthropic.requests[1])
    content = result["content"]
    opening = re.findall(r"<untrusted-([0-9a-f]+) source=\"[^\"<>]*\" retrieved_at=\"[^\"]+\">", content)
    assert len(opening) == 1
    nonce = opening[0]
    body = content.split("\n")[1]
    assert "<" not in body and ">" not in body and "\uff1c" not in body
    assert content.count(f"</untrusted-{nonce}>") == 1
    assert content.index(f"</untrusted-{nonce}>") > content.index(body)
    decoded = json.loads(body)
    assert decoded["content"] == Hostile.PAYLOAD and decoded["title"] == "<b>title</b>"


async def test_system_prompt_catalog_and_history_carry_cache_breakpoints(app_factory, fake_anthropic):
    app = await app_factory()
    await say(app, "one")
    await say(app, "two")
    first, second = (r.json for r in fake_anthropic.requests)
    assert first["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert second["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert json.dumps(first["tools"]) == json.dumps(second["tools"])
    assert [t["name"] for t in first["tools"]] == sorted(t["name"] for t in first["tools"])
    stored, _ = await app.agent.journal.stored(await app.agent.session_id(message("x")))
    assert "cache_control" not in json.dumps(stored)


@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_usage_of_every_model_call_is_recorded(app_factory, fake_model, provider_name):
    app = await app_factory()
    await say(app, "hello")
    await say(app, "again")
    rows = await app.services.store.fetchall("SELECT * FROM usage ORDER BY id")
    assert len(rows) == 2
    if provider_name == "anthropic":   # the fake Anthropic simulates prompt caching
        assert rows[1]["cache_read_tokens"] > 0
    assert all(r["output_tokens"] > 0 and r["sender"] == "cli:local" for r in rows)
    assert all(r["model"] == model_id(provider_name) and r["cost"] > 0 for r in rows)


async def test_the_step_limit_stops_the_loop_and_keeps_everything(app_factory, fake_anthropic):
    app = await app_factory({"agent": {"max_steps": 3}})
    recorder = Recorder()
    app.services.registry.register(recorder, "tests")
    fake_anthropic.responder = lambda body: tool_use("recorder", {"value": "again"})
    sink = await say(app, "loop forever")
    assert len(recorder.calls) == 3
    assert any("stopped after 3 steps" in n.text for n in sink.of(Notice))
    fake_anthropic.responder = lambda body: text("fine")
    sink = await say(app, "continue")
    assert sink.text == "fine"
    assert fake_anthropic.last_request.json["messages"][0]["content"][0]["text"] == "loop forever"


async def test_stop_cancels_a_running_tool_and_the_next_turn_works(app_factory, fake_anthropic):
    app = await app_factory()
    blocker = Blocker()
    app.services.registry.register(blocker, "tests")
    fake_anthropic.script(tool_use("blocker", {}))
    turn = asyncio.create_task(say(app, "wait"))
    await asyncio.wait_for(blocker.started.wait(), 5)
    stopper = await say(app, "/stop")
    sink = await asyncio.wait_for(turn, 5)
    assert blocker.cancelled
    assert stopper.of(Notice) == []  # the running turn answers "Stopped." itself
    assert any(n.text == "Stopped." for n in sink.of(Notice))
    assert sink.of(ToolFinished)[-1].summary == "cancelled"
    fake_anthropic.script(text("back"))
    assert (await say(app, "hello?")).text == "back"
    (result,) = results_of(fake_anthropic.last_request)
    assert result["is_error"] and result["content"] == "(cancelled)"


async def test_stop_with_nothing_running_says_so(app_factory):
    app = await app_factory()
    sink = await say(app, "/stop")
    assert [n.text for n in sink.of(Notice)] == ["Nothing is running."]


async def test_messages_of_one_session_are_answered_in_arrival_order(app_factory, fake_anthropic):
    app = await app_factory()
    fake_anthropic.delay = 0.05
    sinks = [CollectingSink() for _ in range(4)]
    await asyncio.gather(*(app.agent.handle(message(f"m{i}"), sinks[i]) for i in range(4)))
    asked = [r.json["messages"][-1]["content"][-1]["text"] for r in fake_anthropic.requests]
    assert asked == ["m0", "m1", "m2", "m3"]
    assert [s.text for s in sinks] == [f"ok: m{i}" for i in range(4)]


async def test_different_sessions_run_concurrently(app_factory, fake_anthropic):
    senders = {f"telegram:{i}": "full" for i in range(10)}
    # The client waits longer than the fake may hold a call, so a wait cut short is the fake's.
    app = await app_factory({"senders": senders, "agent": {"llm_timeout_seconds": EVENTUALLY * 2}})
    asked, everyone_asked = [], asyncio.Event()
    deadline = asyncio.get_running_loop().time() + EVENTUALLY

    async def answer_once_all_ten_wait(body: dict) -> object:
        # No clock bound: each model call is answered only once all ten are waiting at the same
        # time, which sessions run one after another never reach (they then get told so).
        asked.append(body)
        if len(asked) == len(senders):
            everyone_asked.set()
        remaining = deadline - asyncio.get_running_loop().time()
        try:
            await asyncio.wait_for(everyone_asked.wait(), max(remaining, 0))
        except TimeoutError:
            return text(f"serialised: {len(asked)} of {len(senders)} calls were waiting at once")
        return text("ok: hi")

    fake_anthropic.responder = answer_once_all_ten_wait
    sinks = await asyncio.gather(*(say(app, "hi", sender=s, chat=s[9:]) for s in senders))
    assert [s.text for s in sinks] == ["ok: hi"] * len(senders)
    assert len(app.agent.queue) == 0  # no per-session state left behind


async def test_new_starts_a_fresh_session(app_factory, fake_anthropic):
    app = await app_factory()
    await say(app, "remember banana")
    sink = await say(app, "/new")
    assert sink.of(Notice)[0].text == "Started a fresh conversation."
    await say(app, "what fruit?")
    assert len(fake_anthropic.last_request.json["messages"]) == 1


async def test_whoami_and_tools_describe_the_sender(app_factory):
    app = await app_factory({"senders": {"telegram:5": "read_only"}})
    who = (await say(app, "/whoami", sender="telegram:5", chat="5")).of(Notice)[0].text
    assert "telegram:5" in who and "read_only" in who
    tools = (await say(app, "/tools@myclaw_bot", sender="telegram:5", chat="5")).of(Notice)[0].text
    assert "time_now" in tools


async def test_an_overlong_message_is_refused_with_a_clear_reason(app_factory, fake_anthropic):
    app = await app_factory()
    sink = await say(app, "x" * 25_000)
    assert "too long" in sink.of(Notice)[0].text
    assert fake_anthropic.requests == []


@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_done_carries_the_final_text(app_factory, fake_model):
    app = await app_factory()
    fake_model.script(text("hello there"))
    sink = await say(app, "hi")
    assert sink.of(Done)[-1].text == "hello there"


async def test_tools_hear_about_start_new_sessions_and_shutdown(app_factory):
    from bot.core.tool import BaseTool, ToolMeta

    class Listener(BaseTool):
        meta = ToolMeta(name="listener", description="Listens to session events.", risk="low",
                        schema={"type": "object", "properties": {}, "additionalProperties": False},
                        has_side_effects=False, returns_untrusted=False, capability_required="t")

        def __init__(self):
            self.events = []

        async def on_session(self, event, ctx):
            self.events.append((event, str(ctx.sender)))
            if event == "new_session":
                raise RuntimeError("a buggy hook must not break /new")

    app = await app_factory()
    listener = Listener()
    app.services.registry.register(listener, "tests")
    await app.start_services()
    sink = await say(app, "/new", sender="cli:local")
    assert sink.of(Notice)[0].text == "Started a fresh conversation."
    await app.close()
    assert listener.events == [("start", "cli:local"), ("new_session", "cli:local"),
                               ("shutdown", "cli:local")]


async def test_a_long_conversation_is_compacted_by_the_small_model(app_factory, fake_anthropic):
    app = await app_factory({"agent": {"context_budget_tokens": 1000}})

    def responder(body):
        if body["model"] == "claude-haiku-5-5":
            return text("SUMMARY: the user said many long things")
        return text("noted")

    fake_anthropic.responder = responder
    for i in range(12):
        await say(app, f"message {i}: " + "words " * 60)
    summaries = [r for r in fake_anthropic.requests if r.json["model"] == "claude-haiku-5-5"]
    assert summaries, "the history was never compacted"
    last = fake_anthropic.last_request.json
    assert last["model"] == "claude-sonnet-5-5"
    assert "SUMMARY: the user said many long things" in last["messages"][0]["content"][0]["text"]
    assert last["messages"][-1]["content"][-1]["text"].startswith("message 11:")
    stored, _ = await app.agent.journal.stored(await app.agent.session_id(message("x")))
    assert len(stored) < 24
