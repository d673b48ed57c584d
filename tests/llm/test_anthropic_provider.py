"""The Anthropic provider sends a streamed call's body as the runtime built it, encoded once
(not copied container by container by the SDK first), and falls back to the SDK's own method
for what plain JSON cannot say."""

from __future__ import annotations

import json

from bot.llm.anthropic_provider import AnthropicProvider, EncodedParts, streamed_body
from tests.fakes.anthropic_server import reply, text, tool_use

PARAMS = {"model": "claude-sonnet-5-5", "max_tokens": 64,
          "system": [{"type": "text", "text": "Be brief. é", "cache_control": {"type": "ephemeral"}}],
          "tools": [{"name": "time_now", "description": "The time.",
                     "input_schema": {"type": "object", "properties": {}}}],
          "messages": [{"role": "user", "content": [{"type": "text", "text": "what time? 😀"}]}]}


def provider(fake) -> AnthropicProvider:
    return AnthropicProvider(key="test-key", key_env="ANTHROPIC_API_KEY", base_url=fake.base_url,
                             timeout=10, max_retries=0)


async def test_a_streamed_call_sends_exactly_the_params_and_reads_the_answer(fake_anthropic):
    fake_anthropic.script(reply(text("it is "), tool_use("time_now", {})))
    heard: list[str] = []

    async def on_text(delta: str) -> None:
        heard.append(delta)

    llm = provider(fake_anthropic)
    try:
        answer = await llm.complete(dict(PARAMS), on_text)
    finally:
        await llm.close()
    request = fake_anthropic.last_request
    assert request.json == {**PARAMS, "stream": True}
    assert request.headers["content-type"] == "application/json"
    assert "".join(heard) == "it is "
    assert [b["type"] for b in answer.content] == ["text", "tool_use"]
    assert answer.usage["output_tokens"] > 0


def test_params_plain_json_cannot_carry_or_sdk_options_are_left_to_the_sdk():
    assert json.loads(streamed_body(PARAMS)) == {**PARAMS, "stream": True}
    assert streamed_body({**PARAMS, "extra_headers": {"x": "y"}}) is None
    assert streamed_body({**PARAMS, "metadata": {"when": object()}}) is None
    assert streamed_body({**PARAMS, "temperature": float("nan")}) is None


def test_the_body_is_the_text_of_the_params_encoded_whole_for_any_history():
    history = [{"role": "user", "content": [{"type": "text", "text": text}]}
               for text in ("plain", "é ñ 😀 \u2028", 'quote " backslash \\ tab \t nul \x00 \x1f',
                            "\u202e right-to-left \u0301 combining", "")]
    history.append({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x",
                                                      "input": {"n": 3, "f": 0.1, "b": True,
                                                                "z": None, "l": [1, [2, {}]]}}]})
    params = {**PARAMS, "messages": history}
    whole = json.dumps({**params, "stream": True}, ensure_ascii=False, separators=(",", ":"))
    assert streamed_body(params).decode() == whole
    assert streamed_body(params, EncodedParts()).decode() == whole


def test_the_reused_parts_are_encoded_once_and_the_body_is_the_same_text():
    parts, asked = EncodedParts(), []
    text = parts.text

    def counting(value):
        asked.append(value)
        return text(value)

    parts.text = counting
    whole = json.dumps({**PARAMS, "stream": True}, ensure_ascii=False, separators=(",", ":"))
    for turn in range(3):
        params = {**PARAMS, "messages": [*PARAMS["messages"]] * (turn + 1)}
        assert streamed_body(params, parts) == streamed_body(params)
    assert streamed_body(PARAMS, parts).decode() == whole
    assert [id(v) for v in asked] == [id(PARAMS["system"]), id(PARAMS["tools"])] * 4
    assert text(PARAMS["tools"]) is text(PARAMS["tools"])   # kept, not encoded again
    assert text([*PARAMS["tools"]]) is not text(PARAMS["tools"])   # another object: its own
