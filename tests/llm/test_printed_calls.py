"""A tool call a local model prints as JSON text is checked against the offered tool's schema,
compiled once per schema — never once per answer — and never with another schema's rules."""

from __future__ import annotations

import gc

from bot.llm.compat import stream


def offered(schema):
    return {"recorder": {"name": "recorder", "input_schema": schema}}


def test_a_printed_call_is_a_call_only_when_its_arguments_pass_the_schema():
    tools = offered({"type": "object", "required": ["value"],
                     "properties": {"value": {"type": "string"}}})
    call = stream.printed_call('{"name": "recorder", "arguments": {"value": "x"}}', tools)
    assert call["name"] == "recorder" and call["input"] == {"value": "x"}
    assert stream.printed_call('{"name": "recorder", "arguments": {"value": 3}}', tools) is None


def test_the_same_schema_is_compiled_once_however_many_answers_use_it(monkeypatch):
    compiled = []

    def counting(schema):
        compiled.append(schema)
        return stream_validator(schema)

    stream_validator = stream.validator
    monkeypatch.setattr(stream, "validator", counting)
    tools = offered({"type": "object", "properties": {"value": {"type": "string"}}})
    for _ in range(50):
        assert stream.printed_call('{"name": "recorder", "arguments": {"value": "x"}}', tools)
    assert len(compiled) == 1


def test_a_new_schema_at_a_reused_address_gets_its_own_rules():
    for limit in range(1, 40):   # schemas made and dropped: CPython reuses their addresses
        tools = offered({"type": "object", "properties": {"value": {"maxLength": limit}}})
        fits, too_long = "x" * limit, "x" * (limit + 1)
        assert stream.printed_call(f'{{"name": "recorder", "arguments": {{"value": "{fits}"}}}}',
                                   tools)
        assert stream.printed_call(
            f'{{"name": "recorder", "arguments": {{"value": "{too_long}"}}}}', tools) is None
        del tools
        gc.collect()
