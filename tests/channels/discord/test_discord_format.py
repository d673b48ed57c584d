"""Splitting answers at Discord's 2000-character limit without breaking code blocks."""

from __future__ import annotations

import pytest

from channels.discord.rendering import DISCORD_LIMIT, split_message


def fences_balanced(chunk: str) -> bool:
    return chunk.count("```") % 2 == 0


def test_a_short_answer_is_sent_as_it_is():
    assert split_message("hello **world**") == ["hello **world**"]


def test_a_blank_answer_gives_no_message_at_all():
    assert split_message("  \n ") == []


def test_long_prose_is_cut_at_line_boundaries_and_nothing_is_lost():
    lines = [f"Paragraph line {i}: " + "lorem ipsum " * 8 for i in range(120)]
    text = "\n".join(lines)
    chunks = split_message(text)
    assert len(chunks) > 1 and all(len(c) <= DISCORD_LIMIT for c in chunks)
    assert "\n".join(chunks).split() == text.split()
    assert all(chunk.splitlines()[0].startswith("Paragraph line") for chunk in chunks)


def test_a_code_block_across_a_boundary_is_closed_and_reopened_with_its_language():
    code = "\n".join(f"print({i})  # " + "x" * 40 for i in range(100))
    text = f"Intro\n```python\n{code}\n```\nOutro"
    chunks = split_message(text)
    assert len(chunks) >= 3
    assert all(len(c) <= DISCORD_LIMIT and fences_balanced(c) for c in chunks)
    assert all(c.startswith("```python\n") for c in chunks[1:])
    assert chunks[-1].endswith("Outro")
    body = [line for c in chunks for line in c.splitlines() if line.startswith("print(")]
    assert body == code.splitlines()


def test_a_line_longer_than_the_limit_is_cut_at_spaces_or_hard_when_there_are_none():
    words = "word " * 1000
    unbroken = "x" * 4500
    for text in (words, unbroken):
        chunks = split_message(text)
        assert all(len(c) <= DISCORD_LIMIT for c in chunks)
        assert "".join(c.strip() for c in chunks).replace(" ", "") == text.replace(" ", "")


def test_an_unclosed_fence_from_the_model_is_closed_so_the_rest_does_not_render_as_code():
    chunks = split_message("Look:\n```\nunfinished code")
    assert chunks == ["Look:\n```\nunfinished code\n```"]


def test_a_limit_too_small_for_fences_is_refused():
    with pytest.raises(ValueError):
        split_message("text", limit=40)
