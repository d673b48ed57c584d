"""The OpenAI-compatible provider through the real `openai` SDK against the fake server:
streamed text and tool_calls deltas become the runtime's blocks, usage is mapped (or estimated
when the server sends none), calls printed as JSON text are taken only when they are exactly
one valid call, and every error gets its one-line message."""

from __future__ import annotations

import pytest

from bot.core.errors import LLMError
from bot.llm.capabilities import LOCAL, Capabilities
from bot.llm.compat.provider import OpenAIProvider
from tests.fakes.openai_server import FakeOpenAI, error, printed_call, raw_call, reply, text, tool_use

RECORDER = {"name": "recorder", "description": "Records its calls.",
            "input_schema": {"type": "object", "additionalProperties": False,
                             "properties": {"value": {"type": "string"}}, "required": ["value"]}}


@pytest.fixture
async def fake():
    async with FakeOpenAI() as running:
        yield running


@pytest.fixture
async def provider(fake):
    made = OpenAIProvider(base_url=fake.api_url, key="sk-test", key_env="TEST_KEY",
                          key_required=True,
                          caps=Capabilities(pdfs=False, prompt_caching="automatic"), timeout=10,
                          max_retries=0)
    yield made
    await made.close()


def params(text_: str = "hello", tools: bool = True, **extra) -> dict:
    request = {"model": "fake-gpt-1", "max_tokens": 100,
               "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
               "messages": [{"role": "user", "content": [{"type": "text", "text": text_}]}], **extra}
    if tools:
        request["tools"] = [RECORDER]
    return request


class Said:
    def __init__(self) -> None:
        self.pieces: list[str] = []

    async def __call__(self, piece: str) -> None:
        self.pieces.append(piece)


async def test_streamed_text_is_passed_on_in_pieces_and_usage_comes_from_the_final_chunk(fake, provider):
    fake.script(reply(text("Hello there, friend."),
                      usage={"input_tokens": 90, "output_tokens": 7, "cache_read_input_tokens": 10}))
    said = Said()
    response = await provider.complete(params(tools=False), said)
    assert len(said.pieces) == 3 and "".join(said.pieces) == "Hello there, friend."
    assert response.content == [{"type": "text", "text": "Hello there, friend."}]
    assert response.stop_reason == "end_turn" and response.model == "fake-gpt-1"
    assert response.usage == {"input_tokens": 90, "output_tokens": 7, "cache_read_tokens": 10,
                              "cache_write_tokens": 0}
    sent = fake.last_request.json
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}  # no markers


async def test_streamed_tool_call_deltas_become_tool_use_blocks(fake, provider):
    fake.script(reply(text("Recording."), tool_use("recorder", {"value": "a"}, id="call_1"),
                      tool_use("recorder", {"value": "b"}, id="call_2")))
    response = await provider.complete(params(), Said())
    assert response.stop_reason == "tool_use"
    assert response.content == [
        {"type": "text", "text": "Recording."},
        {"type": "tool_use", "id": "call_1", "name": "recorder", "input": {"value": "a"}},
        {"type": "tool_use", "id": "call_2", "name": "recorder", "input": {"value": "b"}}]
    assert fake.last_request.json["tools"][0]["function"]["parameters"] == RECORDER["input_schema"]


async def test_a_cut_off_argument_string_is_kept_visible_for_validation_to_refuse(fake, provider):
    fake.script(raw_call("recorder", '{"value": "a'))
    response = await provider.complete(params(), Said())
    (call,) = response.tool_uses
    assert call["input"] == {"__unparsable_json__": '{"value": "a'}


async def test_without_usage_from_the_server_the_tokens_are_estimated(fake, provider):
    fake.send_usage = False   # as Ollama does
    fake.script(text("An answer of some length."))
    response = await provider.complete(params(tools=False), Said())
    assert response.usage["input_tokens"] > 0 and response.usage["output_tokens"] > 0


async def test_a_tool_call_printed_as_the_whole_answer_is_a_call_and_is_not_shown(fake, provider):
    fake.script(printed_call("recorder", {"value": "x"}))
    said = Said()
    response = await provider.complete(params(), said)
    (call,) = response.tool_uses
    assert (call["name"], call["input"]) == ("recorder", {"value": "x"})
    assert said.pieces == [] and response.text == ""


@pytest.mark.parametrize("answer", [
    '{"name": "recorder", "arguments": {"value": 3}}',             # fails the schema
    '{"name": "unknown_tool", "arguments": {"value": "x"}}',       # not an offered tool
    'Sure: {"name": "recorder", "arguments": {"value": "x"}}',     # more than the object
    '{"name": "recorder", "arguments": {"value": "x"}} {"a": 1}',  # two objects
    '{"value": "x"}',                                              # names no tool
], ids=["bad-args", "unknown-tool", "prose-around", "two-objects", "no-name"])
async def test_anything_but_exactly_one_valid_printed_call_is_text(fake, provider, answer):
    fake.script(text(answer))
    said = Said()
    response = await provider.complete(params(), said)
    assert response.tool_uses == [] and response.text == answer
    assert "".join(said.pieces) == answer   # shown once it is known to be text


async def test_a_printed_call_in_a_code_fence_with_parameters_is_also_a_call(fake, provider):
    fake.script(text('```json\n{"name": "recorder", "parameters": {"value": "y"}}\n```'))
    response = await provider.complete(params(), Said())
    assert [c["input"] for c in response.tool_uses] == [{"value": "y"}]


async def test_without_tools_offered_json_text_stays_text(fake, provider):
    fake.script(printed_call("recorder", {"value": "x"}))
    response = await provider.complete(params(tools=False), Said())
    assert response.tool_uses == [] and '"recorder"' in response.text


async def test_a_whole_completion_without_streaming_is_read_the_same_way(fake, provider):
    fake.script(reply(text("ok"), tool_use("recorder", {"value": "z"}, id="call_9")))
    response = await provider.complete(params(), None)
    assert response.content[1] == {"type": "tool_use", "id": "call_9", "name": "recorder",
                                    "input": {"value": "z"}}
    assert "stream" not in fake.last_request.json


async def test_a_slow_stream_is_read_to_its_end(fake, provider):
    fake.script(reply(text("slow but complete"), chunk_delay=0.05))
    said = Said()
    response = await provider.complete(params(tools=False), said)
    assert response.text == "slow but complete" and len(said.pieces) == 3


async def test_history_with_calls_and_results_goes_out_as_tool_calls_and_tool_messages(fake, provider):
    history = params(messages=[
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "recorder",
                                           "input": {"value": "a"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "done"},
                                     {"type": "text", "text": "and now?"}]}])
    await provider.complete(history, Said())
    sent = fake.last_request.json["messages"]
    assert sent[2]["tool_calls"][0]["function"] == {"name": "recorder", "arguments": '{"value": "a"}'}
    assert sent[3] == {"role": "tool", "tool_call_id": "c1", "content": "done"}
    assert sent[4] == {"role": "user", "content": "and now?"}


async def test_a_route_that_reads_cache_markers_gets_them_on_its_text_parts(fake):
    routed = OpenAIProvider(base_url=fake.api_url, key="k", key_env="OPENROUTER_API_KEY",
                            key_required=True, caps=Capabilities(pdfs=False), timeout=10,
                            max_retries=0)
    fake.script(text("hi"))
    await routed.complete(params(), None)
    await routed.close()
    assert fake.last_request.json["messages"][0]["content"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]


async def test_a_model_without_parallel_calls_is_asked_for_one_at_a_time(fake):
    local = OpenAIProvider(base_url=fake.api_url, key=None, key_env="OLLAMA_API_KEY",
                           key_required=False, caps=LOCAL, timeout=10, max_retries=0)
    fake.script(text("hi"))
    await local.complete(params(), None)
    await local.close()
    assert fake.last_request.json["parallel_tool_calls"] is False
    assert fake.last_request.headers["authorization"] == "Bearer not-needed"


@pytest.mark.parametrize(("answer", "user_says", "retryable"), [
    (error(429, "rate_limit_exceeded", "Rate limit reached for requests"),
     "rate-limiting this bot", True),
    (error(429, "insufficient_quota", "You exceeded your current quota, please check your plan "
           "and billing details."), "run out of credit", False),
    (error(529, "overloaded_error", "Overloaded"), "overloaded", True),
    (error(503, "server_error", "The server is overloaded"), "overloaded", True),
    (error(500, "server_error", "boom"), "The model API failed", True),
    (error(401, "invalid_api_key", "Incorrect API key provided"), "TEST_KEY", False),
    (error(404, "model_not_found", "The model `fake-gpt-1` does not exist"),
     "'fake-gpt-1' does not exist", False),
    (error(400, "context_length_exceeded", "This model's maximum context length is 8192 tokens"),
     "too long for the model 'fake-gpt-1'", False),
], ids=["rate-limit", "no-credit", "overloaded-529", "overloaded-503", "5xx", "bad-key",
        "unknown-model", "context-too-long"])
async def test_each_error_of_the_endpoint_has_its_one_line(fake, provider, answer, user_says,
                                                           retryable):
    fake.script(answer)
    with pytest.raises(LLMError) as raised:
        await provider.complete(params(), Said())
    assert user_says in raised.value.user_message and "\n" not in raised.value.user_message
    assert raised.value.retryable is retryable


async def test_a_remote_endpoint_without_its_key_says_which_variable_to_set(fake):
    keyless = OpenAIProvider(base_url="https://api.example.com/v1", key=None, key_env="EXAMPLE_KEY",
                             key_required=True, caps=Capabilities(), timeout=10, max_retries=0)
    with pytest.raises(LLMError) as raised:
        await keyless.complete(params(), None)
    assert "EXAMPLE_KEY" in raised.value.user_message and fake.requests == []
