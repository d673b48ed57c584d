"""The fake Anthropic Messages API, exercised with the real anthropic SDK over loopback."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from pathlib import Path

import anthropic
import httpx
import pytest

from tests.fakes.anthropic_server import FakeAnthropic, error, reply, text, tool_results, tool_use

MODEL = "claude-sonnet-5-5"
REPO_ROOT = Path(__file__).resolve().parents[2]


def client_for(fake: FakeAnthropic, max_retries: int = 0) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test-key", max_retries=max_retries)


def ask(content: str | list) -> dict:
    return {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": content}]}


@pytest.fixture
async def fake():
    async with FakeAnthropic() as running:
        yield running


async def test_a_json_request_gets_the_echo_reply_and_is_recorded(fake):
    message = await client_for(fake).messages.create(**ask("hello there"))

    assert [block.text for block in message.content] == ["ok: hello there"]
    assert message.model == MODEL and message.stop_reason == "end_turn"
    recorded = fake.last_request
    assert recorded.path == "/v1/messages"
    assert recorded.json["messages"][0]["content"] == "hello there"
    assert recorded.headers["authorization"] == "Bearer test-key"
    assert recorded.usage == message.usage.model_dump(include={"input_tokens", "output_tokens",
                                                                "cache_creation_input_tokens",
                                                                "cache_read_input_tokens"})


async def test_streamed_text_arrives_in_several_deltas_and_as_one_final_message(fake):
    fake.script(text("a streamed answer of some length"))
    async with client_for(fake).messages.stream(**ask("hi")) as stream:
        deltas = [event.text async for event in stream if event.type == "text"]
        final = await stream.get_final_message()

    assert len(deltas) >= 2
    assert "".join(deltas) == final.content[0].text == "a streamed answer of some length"
    assert final.usage.output_tokens > 1


async def test_a_streamed_tool_use_arrives_with_its_multi_chunk_json_parsed(fake):
    arguments = {"path": "notes/today.md", "lines": [1, 2, 3], "nested": {"flag": True}}
    fake.script(tool_use("read_file", arguments, id="toolu_01"))
    async with client_for(fake).messages.stream(**ask("read it")) as stream:
        json_chunks = [event.partial_json async for event in stream if event.type == "input_json"]
        final = await stream.get_final_message()

    assert len([chunk for chunk in json_chunks if chunk]) >= 2
    (block,) = final.content
    assert (block.type, block.id, block.name, block.input) == ("tool_use", "toolu_01", "read_file", arguments)
    assert final.stop_reason == "tool_use"


async def test_two_tool_use_blocks_in_one_reply_both_reach_the_client(fake):
    fake.script(reply(text("checking both"), tool_use("clock", {}), tool_use("weather", {"city": "Roma"})))
    message = await client_for(fake).messages.create(**ask("time and weather?"))

    assert [block.type for block in message.content] == ["text", "tool_use", "tool_use"]
    first, second = message.content[1:]
    assert (first.name, second.name, second.input) == ("clock", "weather", {"city": "Roma"})
    assert first.id != second.id and first.id.startswith("toolu_")
    assert message.stop_reason == "tool_use"


async def test_a_responder_can_call_a_tool_then_answer_its_result(fake):
    def responder(body: dict):
        results = tool_results(body)
        if results:
            return f"the tool said {results[0]['content']}"
        return tool_use("clock", {}, id="toolu_clock")

    fake.responder = responder
    client = client_for(fake)
    first = await client.messages.create(**ask("what time is it?"))
    history = [{"role": "user", "content": "what time is it?"},
               {"role": "assistant", "content": [block.model_dump(include={"type", "id", "name", "input"})
                                                  for block in first.content]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_clock",
                                             "content": "12:00"}]}]
    second = await client.messages.create(model=MODEL, max_tokens=64, messages=history)

    assert first.content[0].name == "clock"
    assert second.content[0].text == "the tool said 12:00"


async def test_a_tool_use_without_its_result_is_rejected_like_the_real_api(fake):
    history = [{"role": "user", "content": "go"},
               {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_lost", "name": "x",
                                                  "input": {}}]},
               {"role": "user", "content": "and?"}]
    with pytest.raises(anthropic.BadRequestError, match="toolu_lost"):
        await client_for(fake).messages.create(model=MODEL, max_tokens=64, messages=history)


async def test_a_429_is_retried_by_the_sdk_and_both_attempts_are_recorded(fake):
    fake.script(error(429, "rate_limit_error", "slow down"), text("after the wait"))
    message = await client_for(fake, max_retries=2).messages.create(**ask("hi"))

    assert message.content[0].text == "after the wait"
    assert len(fake.requests) == 2
    assert [r.headers["x-stainless-retry-count"] for r in fake.requests] == ["0", "1"]


async def test_a_500_without_retries_raises_internal_server_error(fake):
    fake.script(error(500, "api_error", "boom"))
    with pytest.raises(anthropic.InternalServerError, match="boom"):
        await client_for(fake).messages.create(**ask("hi"))
    assert len(fake.requests) == 1


async def test_a_request_without_any_key_is_rejected_with_401_and_x_api_key_is_accepted(fake):
    async with httpx.AsyncClient(base_url=fake.base_url) as http:
        anonymous = await http.post("/v1/messages", json=ask("hi"))
        keyed = await http.post("/v1/messages", json=ask("hi"), headers={"x-api-key": "k"})

    assert anonymous.status_code == 401
    assert anonymous.json() == {"type": "error", "error": {"type": "authentication_error",
                                                           "message": "x-api-key header is required"}}
    assert keyed.status_code == 200 and keyed.json()["content"][0]["text"] == "ok: hi"


async def test_a_body_that_is_not_json_gets_a_400_and_consumes_no_scripted_reply(fake):
    fake.script(text("kept for later"))
    async with httpx.AsyncClient(base_url=fake.base_url, headers={"x-api-key": "k"}) as http:
        broken = await http.post("/v1/messages", content=b"{not json")
    message = await client_for(fake).messages.create(**ask("hi"))

    assert broken.status_code == 400 and broken.json()["error"]["type"] == "invalid_request_error"
    assert message.content[0].text == "kept for later"


async def test_an_unknown_model_gets_a_404_naming_it(fake):
    fake.unknown_models.add("claude-nonexistent-1")
    with pytest.raises(anthropic.NotFoundError, match="model: claude-nonexistent-1"):
        await client_for(fake).messages.create(**{**ask("hi"), "model": "claude-nonexistent-1"})


async def test_a_reply_delay_holds_that_response_back(fake):
    fake.script(text("late", delay=0.2))
    started = time.monotonic()
    await client_for(fake).messages.create(**ask("hi"))
    assert time.monotonic() - started >= 0.2


async def test_delayed_replies_are_served_concurrently_not_one_after_another(fake):
    fake.delay = 0.3
    client = client_for(fake)
    started = time.monotonic()
    replies = await asyncio.gather(*(client.messages.create(**ask(f"n{i}")) for i in range(30)))
    elapsed = time.monotonic() - started

    assert sorted(r.content[0].text for r in replies) == sorted(f"ok: n{i}" for i in range(30))
    assert 0.3 <= elapsed < 1.5  # serialised, 30 × 0.3 s would take 9 s


async def test_the_second_request_with_the_same_cached_prefix_reads_from_the_cache(fake):
    system = [{"type": "text", "text": "You are a careful assistant. " * 40,
               "cache_control": {"type": "ephemeral"}}]
    client = client_for(fake)
    first = await client.messages.create(**ask("first question"), system=system)
    second = await client.messages.create(**ask("a different question"), system=system)

    assert first.usage.cache_creation_input_tokens > 0 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens == 0
    assert second.usage.input_tokens > 0
    assert 0.5 < fake.cached_fraction(fake.last_request) < 1.0


async def test_a_moved_breakpoint_reads_the_earlier_prefix_and_creates_only_the_rest(fake):
    marker = {"type": "ephemeral"}
    system = [{"type": "text", "text": "rules " * 100, "cache_control": marker}]
    longer = [{"type": "text", "text": "rules " * 100},
              {"type": "text", "text": "more context " * 50, "cache_control": marker}]
    client = client_for(fake)
    first = await client.messages.create(**ask("q"), system=system)
    second = await client.messages.create(**ask("q"), system=longer)

    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens > 0


async def test_without_cache_control_everything_is_plain_input(fake):
    message = await client_for(fake).messages.create(**ask("no caching here"), system="plain system")

    assert message.usage.cache_creation_input_tokens == message.usage.cache_read_input_tokens == 0
    assert fake.cached_fraction(fake.last_request) == 0.0


async def test_an_exception_in_the_responder_fails_the_test_that_owns_the_fake():
    def broken(body: dict):
        raise KeyError("no such thing")

    with pytest.raises(RuntimeError, match="responder raised") as caught:
        async with FakeAnthropic() as fake:
            fake.responder = broken
            with pytest.raises(anthropic.InternalServerError):
                await client_for(fake, max_retries=2).messages.create(**ask("hi"))
            assert len(fake.requests) == 1  # x-should-retry: false stops the SDK retrying
    assert isinstance(caught.value.__cause__, KeyError)


async def test_waiting_for_more_requests_than_arrive_times_out_with_a_clear_message(fake):
    with pytest.raises(TimeoutError, match=re.escape("waited 0.05s for 1 requests; 0 requests so far")):
        await fake.wait_for_requests(1, timeout=0.05)


async def test_a_stream_abandoned_by_the_client_is_recorded_as_aborted(fake):
    fake.script(reply(text("word " * 200), chunk_delay=0.01))
    async with client_for(fake).messages.stream(**ask("long please")) as stream:
        async for event in stream:
            if event.type == "text":
                break
    await fake.wait_until(lambda: fake.last_request.aborted, timeout=5, what="the abort")
    assert fake.last_request.aborted


def test_the_threaded_runner_serves_synchronous_clients():
    with FakeAnthropic.start_in_thread() as handle:
        handle.script(text("from the thread"))
        client = anthropic.Anthropic(base_url=handle.base_url, api_key="k", max_retries=0)
        message = client.messages.create(**ask("hi"))
        recorded = handle.wait_for_requests(1)

    assert message.content[0].text == "from the thread"
    assert recorded[0].json["messages"][0]["content"] == "hi"


async def test_the_subprocess_mode_prints_ready_serves_its_script_and_accepts_more(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool_use": {"name": "clock", "input": {}, "id": "toolu_1"}}]))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.fakes.anthropic_server", "--port", "0", "--script", str(script),
        cwd=REPO_ROOT, stdout=asyncio.subprocess.PIPE)
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), timeout=10)).decode().strip()
        assert line.startswith("READY http://127.0.0.1:")
        base_url = line.split()[1]
        client = anthropic.AsyncAnthropic(base_url=base_url, api_key="k", max_retries=0)
        first = await client.messages.create(**ask("time?"))
        async with httpx.AsyncClient(base_url=base_url) as http:
            queued = await http.post("/_fake/script", json=["scripted later"])
            second = await client.messages.create(**ask("again"))
            seen = (await http.get("/_fake/requests")).json()
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), timeout=10)

    assert first.content[0].name == "clock" and queued.json() == {"queued": 1}
    assert second.content[0].text == "scripted later"
    assert [r["json"]["messages"][0]["content"] for r in seen] == ["time?", "again"]
    assert process.returncode == 0
