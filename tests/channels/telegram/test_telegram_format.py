"""Model Markdown → Telegram HTML, and splitting long replies (channels/telegram/rendering.py).

Every HTML string produced is checked with the fake Bot API's validator, which refuses what
Telegram refuses (unknown tags, bad nesting, unescaped <, >, &, more than 4096 characters).
"""

from __future__ import annotations

import re

from channels.telegram.rendering import MESSAGE_LIMIT, split_message, to_html, truncate, utf16_len
from tests.fakes.telegram_server import html_problem, text_length


def test_bold_italic_code_links_and_headings_become_telegram_html():
    html = to_html("# Plan\nSome **bold**, *italic*, _also italic_, ~~gone~~, `x < y` and "
                   "[the docs](https://example.com/a?b=1&c=2)")
    assert html == ('<b>Plan</b>\nSome <b>bold</b>, <i>italic</i>, <i>also italic</i>, <s>gone</s>, '
                    '<code>x &lt; y</code> and <a href="https://example.com/a?b=1&amp;c=2">the docs</a>')
    assert html_problem(html) is None


def test_a_fenced_code_block_keeps_its_language_and_is_escaped_verbatim():
    html = to_html("Look:\n\n```python\nif a < b and c > d:\n    print('**not bold**')\n```")
    assert html == ('Look:\n\n<pre><code class="language-python">if a &lt; b and c &gt; d:\n'
                    "    print('**not bold**')</code></pre>")
    assert html_problem(html) is None


def test_html_written_by_the_model_is_shown_as_text_never_interpreted():
    html = to_html('<script>alert(1)</script> <b onclick="x">hi</b> & &amp; <a href="javascript:x">')
    assert "<script>" not in html and "<b onclick" not in html
    assert html_problem(html) is None
    assert "&lt;script&gt;" in html and "&amp;amp;" in html


def test_links_with_other_schemes_are_not_turned_into_anchors():
    html = to_html("[click](javascript:alert(1)) [file](file:///etc/passwd)")
    assert "<a " not in html
    assert html_problem(html) is None


def test_snake_case_names_and_lone_asterisks_are_left_alone():
    html = to_html("call read_only_tool with 2 * 3 * 4 and __init__ stays")
    assert "<i>" not in html and "<b>" not in html
    assert "read_only_tool" in html and "2 * 3 * 4" in html


def test_crossing_markers_never_produce_badly_nested_tags():
    for text in ("**a *b** c*", "*a **b* c**", "~~a *b~~ c*", "**a `b** c`", "_a *b_ c*",
                 "**[x](https://e.com)**", "* list item with *emphasis*"):
        assert html_problem(to_html(text)) is None, text


def test_bullets_are_rendered_as_bullets():
    assert to_html("- one\n* two\n+ three") == "• one\n• two\n• three"


def test_an_unclosed_fence_runs_to_the_end_and_stays_valid():
    html = to_html("before\n```js\nlet a = 1 < 2;")
    assert html.endswith('<pre><code class="language-js">let a = 1 &lt; 2;</code></pre>')
    assert html_problem(html) is None


def test_null_bytes_in_the_input_cannot_forge_placeholders():
    html = to_html("`code` then \x000\x00 and \x01bold\x02")
    assert html_problem(html) is None
    assert html.count("<code>") == 1


def test_a_short_reply_is_one_part():
    parts = split_message("Hello **there**")
    assert [p.html for p in parts] == ["Hello <b>there</b>"]
    assert parts[0].plain == "Hello **there**"


def _ten_thousand_character_reply() -> str:
    prose = "\n\n".join(f"Paragraph {i}: " + "words & more words " * 20 for i in range(12))
    code = "\n".join(f"    value_{i} = compute({i}) < limit  # step {i}" for i in range(150))
    text = f"{prose}\n\n```python\n{code}\n```\n\nThat is all **folks**."
    assert len(text) > 10_000
    return text


def test_a_ten_thousand_character_reply_splits_into_valid_parts_of_at_most_4096():
    parts = split_message(_ten_thousand_character_reply())
    assert len(parts) >= 3
    for part in parts:
        assert utf16_len(part.html) <= MESSAGE_LIMIT
        assert text_length(part.html, "HTML") <= MESSAGE_LIMIT
        assert html_problem(part.html) is None
        assert utf16_len(part.plain) <= MESSAGE_LIMIT


def test_a_code_block_split_across_parts_is_closed_and_reopened_in_each():
    parts = split_message(_ten_thousand_character_reply())
    with_code = [p for p in parts if "<pre>" in p.html]
    assert len(with_code) >= 2, "the code block should span several parts"
    for part in with_code:
        assert part.html.count("<pre>") == part.html.count("</pre>")
        assert 'class="language-python"' in part.html
        assert part.plain.count("```") % 2 == 0   # fences balanced in the plain fallback too
    joined = "\n".join(re.sub(r"<[^>]+>", "", p.html) for p in parts)
    for i in (0, 75, 149):
        assert f"value_{i} = compute({i}) &lt; limit  # step {i}" in joined


def test_parts_break_between_paragraphs_not_inside_them():
    paragraphs = [f"Paragraph {i} " + "x" * 900 for i in range(10)]
    parts = split_message("\n\n".join(paragraphs))
    for part in parts:
        assert part.html.startswith("Paragraph ")
        assert part.html.endswith("x")


def test_one_enormous_line_is_cut_into_parts_without_losing_text():
    line = "word " * 3000
    parts = split_message(line)
    assert len(parts) >= 4
    assert all(utf16_len(p.html) <= MESSAGE_LIMIT for p in parts)
    assert "".join(p.plain for p in parts).split() == line.split()


def test_emoji_count_as_two_units_like_telegram_counts_them():
    parts = split_message("😀" * 3000)
    assert len(parts) == 2
    assert all(utf16_len(p.html) <= MESSAGE_LIMIT for p in parts)


def test_truncate_keeps_streamed_previews_under_the_limit():
    assert truncate("short", 10) == "short"
    cut = truncate("a" * 5000, 4000)
    assert utf16_len(cut) == 4000 and cut.endswith("…")
