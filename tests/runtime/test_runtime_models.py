"""The runtime with models other than the default: one that takes no tools gets no catalog and
the commands say tools are off; a local model's call printed as JSON text, or sent broken,
goes through the same validation, policy, preview and approval as any call."""

from __future__ import annotations

import json

import pytest

from bot.core.approval_cards import ApprovalNeeded
from bot.core.events import CollectingSink, Notice
from bot.runtime.commands import TOOLS_OFF
from tests.fakes.openai_server import printed_call, raw_call, text
from tests.runtime.test_runtime import say
from tests.runtime.test_runtime_approvals import SUPERVISED, message
from tests.support.providers import PROVIDERS, limited, tool_result_texts
from tests.support.runtime_tools import Recorder, Writer, answer


@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_a_model_without_tools_gets_no_catalog_and_the_commands_say_so(
        app_factory, fake_model, provider_name):
    app = await app_factory(limited(provider_name, fake_model, tools=False))
    fake_model.script(text("Just words."))
    assert (await say(app, "hello")).text == "Just words."
    assert "tools" not in fake_model.last_request.json
    off = TOOLS_OFF.format(model="limited")
    who = (await say(app, "/whoami")).of(Notice)[0].text
    assert off in who
    assert (await say(app, "/tools")).of(Notice)[0].text == off


async def test_the_commands_list_tools_when_the_model_takes_them(app_factory):
    app = await app_factory()
    assert "off" not in (await say(app, "/whoami")).of(Notice)[0].text
    assert "time_now" in (await say(app, "/tools")).of(Notice)[0].text


@pytest.mark.parametrize("provider_name", ["openai"])
async def test_a_call_printed_as_json_waits_for_approval_and_runs_once_approved(
        app_factory, fake_model):
    app = await app_factory(SUPERVISED)
    writer = Writer()
    app.services.registry.register(writer, "tests")
    fake_model.script(printed_call("writer", {"note": "milk"}))
    sink = CollectingSink()
    await app.agent.handle(message("write milk"), sink)
    (needed,) = sink.of(ApprovalNeeded)
    assert needed.approval.summary.endswith("\nWrite the note 'milk'") and sink.text == ""
    fake_model.script(text("Written."))
    follow = CollectingSink()
    assert (await answer(app.agent, needed.approval.id, "telegram:1", "approve", follow)).ok
    await app.agent.queue.drain(5)
    assert writer.executed == ["milk"] and follow.text == "Written."
    sent = fake_model.last_request.json["messages"]
    call = next(m for m in sent if m.get("tool_calls"))["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == ("writer", {"note": "milk"})


@pytest.mark.parametrize("provider_name", ["openai"])
async def test_a_broken_call_is_an_invalid_args_result_and_the_turn_goes_on(app_factory,
                                                                           fake_model):
    app = await app_factory()
    recorder = Recorder()
    app.services.registry.register(recorder, "tests")
    fake_model.script(raw_call("recorder", '{"value": "a'), text("Sorry, my mistake."))
    sink = await say(app, "record a")
    assert sink.text == "Sorry, my mistake." and recorder.calls == []
    (result,) = tool_result_texts(fake_model, fake_model.requests[1])
    assert result.startswith("invalid_args: recorder: invalid arguments")
    # the model is shown its own broken arguments, not a rewritten version
    broken = fake_model.requests[1].json["messages"][-2]["tool_calls"][0]["function"]
    assert broken["arguments"] == '{"value": "a'
