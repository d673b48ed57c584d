"""The raw-stream accumulator: text as it arrives, tool inputs from JSON chunks, usage."""

from __future__ import annotations

from types import SimpleNamespace as NS

from bot.llm.stream import StreamAccumulator


def events(*items):
    return [NS(**item) for item in items]


def json_delta(index, chunk):
    return {"type": "content_block_delta", "index": index,
            "delta": NS(type="input_json_delta", partial_json=chunk)}


async def feed_all(accumulator, items):
    for event in events(*items):
        await accumulator.feed(event)


async def test_text_and_a_chunked_tool_input_are_rebuilt_and_text_is_passed_on():
    seen = []

    async def on_text(text):
        seen.append(text)

    acc = StreamAccumulator(on_text)
    await feed_all(acc, [
        {"type": "message_start", "message": NS(model="m", usage=NS(input_tokens=10, output_tokens=1,
                                                                    cache_read_input_tokens=7,
                                                                    cache_creation_input_tokens=None))},
        {"type": "content_block_start", "index": 0, "content_block": NS(type="text", text="")},
        {"type": "content_block_delta", "index": 0, "delta": NS(type="text_delta", text="Hel")},
        {"type": "content_block_delta", "index": 0, "delta": NS(type="text_delta", text="lo")},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1,
         "content_block": NS(type="tool_use", id="t1", name="fs_read", input={})},
        json_delta(1, '{"pa'),
        json_delta(1, 'th": "a"}'),
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": NS(stop_reason="tool_use"), "usage": NS(output_tokens=42)},
    ])
    assert seen == ["Hel", "lo"]
    assert acc.blocks == [{"type": "text", "text": "Hello"},
                          {"type": "tool_use", "id": "t1", "name": "fs_read", "input": {"path": "a"}}]
    assert acc.stop_reason == "tool_use"
    assert acc.usage == {"input_tokens": 10, "output_tokens": 42, "cache_read_input_tokens": 7}


async def test_broken_tool_json_is_kept_visible_so_validation_refuses_it():
    async def on_text(text):
        raise AssertionError("no text expected")

    acc = StreamAccumulator(on_text)
    await feed_all(acc, [
        {"type": "content_block_start", "index": 0,
         "content_block": NS(type="tool_use", id="t1", name="x", input={})},
        json_delta(0, '{"a": '),
        {"type": "content_block_stop", "index": 0},
    ])
    assert acc.blocks[0]["input"] == {"__unparsable_json__": '{"a": '}


async def test_a_tool_call_without_arguments_gets_an_empty_object():
    async def on_text(text):
        return None

    acc = StreamAccumulator(on_text)
    await feed_all(acc, [
        {"type": "content_block_start", "index": 0,
         "content_block": NS(type="tool_use", id="t1", name="time_now", input={})},
        {"type": "content_block_stop", "index": 0},
    ])
    assert acc.blocks[0]["input"] == {}
