"""Model Markdown as WhatsApp formatting, long replies split on paragraph boundaries, the card's
limits (body 1,024, three titles ≤ 20, ids carrying the request id), and the plain fallback when
WhatsApp refuses a formatted message."""

from __future__ import annotations

import time

from bot.core.approval_cards import ApprovalView
from channels.whatsapp import approvals
from channels.whatsapp.rendering import MESSAGE_LIMIT, chunks, plain_of, split_message
from tests.channels.whatsapp.conftest import ADA
from tests.support.languages import EN


def view(summary: str = "Create notes.txt", always: str = "files in notes/") -> ApprovalView:
    return ApprovalView(id="A" * 16, tool="fs_write", risk="medium", summary=summary,
                        sender=f"whatsapp:{ADA}", chat=ADA, channel="whatsapp", args={},
                        expires_at=time.time() + 300, always=always)


def test_markdown_becomes_whatsapp_formatting_and_plain_text_loses_the_markers():
    (part,) = split_message("# Plan\n**bold** and *italic* and ~~gone~~ and `code_x`\n"
                            "- one\n[docs](https://example.org)")
    assert part.text == ("*Plan*\n*bold* and _italic_ and ~gone~ and `code_x`\n• one\n"
                         "docs (https://example.org)")
    assert part.plain == "Plan\nbold and italic and gone and `code_x`\n• one\ndocs (https://example.org)"


def test_code_blocks_are_kept_exactly_as_written():
    (part,) = split_message("see:\n\n```python\nx = **kwargs\n```")
    assert part.text == "see:\n\n```\nx = **kwargs\n```"


def test_a_long_reply_is_split_between_paragraphs_within_the_limit():
    paragraphs = [f"Paragraph {n}: " + ("word " * 300).strip() for n in range(6)]
    parts = split_message("\n\n".join(paragraphs))
    assert len(parts) > 1 and all(len(p.text) <= MESSAGE_LIMIT for p in parts)
    joined = "\n\n".join(p.text for p in parts)
    assert joined == "\n\n".join(paragraphs)   # nothing lost, every cut between paragraphs
    assert all(p.text.startswith("Paragraph") for p in parts)


def test_one_huge_line_is_cut_at_spaces_and_nothing_is_lost():
    line = " ".join(f"w{n}" for n in range(3000))
    parts = split_message(line)
    assert all(len(p.text) <= MESSAGE_LIMIT for p in parts)
    assert "".join(p.text for p in parts) == line


def test_plain_of_drops_whatsapp_markers_only_around_words():
    assert plain_of("*Approval needed* for _you_ at 3*4") == "Approval needed for you at 3*4"


def test_preview_chunks_join_back_to_the_whole_preview():
    text = "".join(f"line {n}\n" for n in range(2000))
    assert "".join(chunks(text, 1000)) == text and all(len(c) <= 1000 for c in chunks(text, 1000))


def test_the_card_fits_whatsapps_limits_and_its_ids_carry_the_request_id():
    message = approvals.card(view(), EN)
    interactive = message["interactive"]
    assert len(interactive["body"]["text"]) <= 1024
    buttons = interactive["action"]["buttons"]
    assert [b["reply"]["title"] for b in buttons] == ["Approve", "Deny", "Always"]
    assert [b["reply"]["id"] for b in buttons] == [f"ap:{'A' * 16}:{c}" for c in "ads"]
    assert approvals.parse_tap(buttons[2]["reply"]["id"]) == ("one", "A" * 16, "always")
    assert "files in notes/" in interactive["body"]["text"]


def test_a_request_without_always_gets_two_buttons():
    assert len(approvals.buttons(view(always=""), EN)) == 2


def test_a_preview_too_long_for_the_body_is_pointed_at_never_cut():
    long = view(summary="rm -rf ./build && " * 100)
    body = approvals.card_body(long, EN)
    assert len(body) <= 1024 and "rm -rf" not in body and "message above" in body
    assert long.summary in approvals.preview_message(long, EN)
    huge = view(summary="x" * 5000)
    assert "document above" in approvals.card_body(huge, EN)
    assert not approvals.preview_in_message(huge, EN)


def test_forged_button_ids_are_not_parsed():
    for forged in ("ap:short:a", f"ap:{'A' * 16}:x", f"ab:{'A' * 16}:s", "c:/pair", ""):
        assert approvals.parse_tap(forged) is None


async def test_a_formatted_message_refused_by_whatsapp_is_resent_as_plain_text(
        bot, wa, fake_anthropic):
    from tests.fakes.anthropic_server import text

    started = await bot()
    fake_anthropic.script(text("**Done**, see `x`"))
    wa.refuse_next(100)
    await started.driver.text(ADA, "go")
    sent = await wa.wait_for(lambda m: m.to == ADA)
    assert sent.text == "Done, see `x`" and wa.refused[0][1]["text"]["body"] == "*Done*, see `x`"
