"""Every approval card, batch page and outcome, rendered in each language (and in a
pseudo-language that marks every catalog message): within the platform's limits, and without a
word that bypassed the catalog (only content — tool names, previews, ids, senders — is left)."""

from __future__ import annotations

import pytest

from bot.core.approval_cards import ApprovalView, CallOutcome
from bot.core.events import Button
from channels.telegram import approvals as tg_cards
from channels.telegram import batch as tg_batch
from channels.telegram.rendering import MESSAGE_LIMIT, utf16_len
from tests.support.languages import LANGUAGES, PSEUDO, unmarked_words

NOW = 1_796_212_800.0
SENDER = "telegram:4242"
RENDERERS = {**LANGUAGES, "pseudo": PSEUDO}


def view(n: int = 0, summary: str = "Create notes.txt (12 bytes)", always: str = "`git` cmd",
         batch: str = "") -> ApprovalView:
    return ApprovalView(id=f"{n:016d}", tool="fs_write", risk="medium", summary=summary,
                        sender=SENDER, chat="4242", channel="telegram", args={},
                        expires_at=NOW + 300, always=always, batch=batch, position=n)


def content(*views: ApprovalView) -> tuple[str, ...]:
    """What a card shows exactly as given (never translated)."""
    words = [SENDER, "Ada (telegram:4343)", "/approve", "/deny", "/new", "CET", "UTC", "PM", "AM"]
    for shown in views:
        words += [shown.tool, shown.summary, shown.id, shown.always]
    return tuple(words)


def plain_of_keyboard(markup) -> list[str]:
    return [b.text for row in markup.inline_keyboard for b in row] if markup else []


@pytest.mark.parametrize("language", sorted(RENDERERS))
def test_a_telegram_request_and_each_outcome_use_only_catalog_words_within_limits(language):
    tr = RENDERERS[language]
    card = view()
    shown = [tg_cards.request_message(card, tr), tg_cards.request_fallback(card, tr)]
    shown += [tg_cards.outcome_message(card, choice, "Ada (telegram:4343)", NOW, tr)
              for choice in ("approve", "deny", "always", "expire")]
    buttons = plain_of_keyboard(tg_cards.keyboard(card, tr))
    for part in shown:
        assert utf16_len(part.html) <= MESSAGE_LIMIT and len(part.plain) <= MESSAGE_LIMIT
    assert all(len(d.encode()) <= 64 for d in
               (b.callback_data for row in tg_cards.keyboard(card, tr).inline_keyboard for b in row))
    if language == "pseudo":
        for text in [p.plain for p in shown] + buttons:
            assert unmarked_words(text, content(card)) == []


@pytest.mark.parametrize("language", sorted(RENDERERS))
def test_every_telegram_batch_page_fits_and_speaks_only_catalog_words(language):
    tr = RENDERERS[language]
    views = [view(n, summary=f"Run <&> {n} " + "é" * 900, always="`x`" * 30 + " chat",
                  batch="B" * 16) for n in range(11)]
    for page in tg_batch.pages(views, tr):
        for calls in ([CallOutcome(v, "") for v in page.calls],
                      [CallOutcome(v, "approve", "Ada (telegram:4343)", NOW) for v in page.calls]):
            part = tg_batch.page_part(page, calls, len(views), tr)
            assert utf16_len(part.html) <= MESSAGE_LIMIT
            keyboard = tg_batch.page_keyboard(page, calls, True, tr)
            assert all(len(b.callback_data.encode()) <= 64
                       for row in keyboard.inline_keyboard for b in row)
            if language == "pseudo":
                words = [part.plain, *plain_of_keyboard(keyboard)]
                words += [p.plain for p in tg_batch.continuation_parts(page, tr)]
                for text in words:
                    assert unmarked_words(text, content(*views)) == []


def test_the_pseudo_language_catches_a_word_built_outside_the_catalog():
    assert unmarked_words("⟦Approve⟧ Requested by telegram:4242", (SENDER,)) == ["Requested"]
    assert unmarked_words("⟦Approve ⟦nested⟧⟧ fs_write", ("fs_write",)) == []


@pytest.mark.parametrize("language", sorted(RENDERERS))
def test_a_discord_request_its_outcomes_and_batch_pages_fit_and_speak_only_catalog_words(language):
    from channels.discord import approvals as dc_cards
    from channels.discord import batch as dc_batch
    from channels.discord.approval_text import label_for

    tr = RENDERERS[language]
    card = view(summary="git push origin main", always="`git push` " + "x" * 90)
    texts = [dc_cards.request_text(card, tr)]
    texts += [dc_cards.outcome_text(card, label_for(status, "discord:7", tr), "discord:7", tr, NOW)
              for status in ("approved", "denied", "expired")]
    labels = [item.item.label for item in dc_cards.buttons_for(card, tr).children]
    views = [view(n, summary=f"rm -rf build/{n} " + "é" * 700, always="`rm` " + "y" * 70,
                  batch="C" * 16) for n in range(9)]
    for page in dc_batch.pages(views, tr):
        calls = [CallOutcome(v, "") for v in page.calls]
        texts.append(dc_batch.page_text(page, calls, len(views), tr))
        texts += dc_batch.continuation_texts(page, tr)
        answered = [CallOutcome(v, "deny", "discord:7", NOW) for v in page.calls]
        texts.append(dc_batch.page_text(page, answered, len(views), tr))
        labels += [getattr(b, "item", b).label
                   for b in dc_batch.page_view(page, calls, True, tr).children]
    assert all(len(text) <= 2000 for text in texts)
    assert all(len(label) <= 80 for label in labels)
    if language == "pseudo":
        shown = (*content(card, *views), "<@7>", "<t:", ":R>", ":T>", "```")
        for text in texts + labels:
            assert unmarked_words(text, shown) == [], text


def slack_view(n: int = 0, summary: str = "Create notes.txt (12 bytes)",
               always: str = "`git` cmd", batch: str = "") -> ApprovalView:
    return ApprovalView(id=f"{n:016d}", tool="fs_write", risk="medium", summary=summary,
                        sender="slack:UADA", chat="DADA", channel="slack", args={},
                        expires_at=NOW + 300, always=always, batch=batch, position=n)


def slack_shown(blocks: list[dict]) -> list[str]:
    """What a person reads of a Slack card: its text and its buttons' labels."""
    from tests.fakes.slack_server import buttons_of, visible_text

    return [visible_text({"blocks": blocks}), *buttons_of({"blocks": blocks})]


SLACK_CONTENT = ("<@UADA>", "slack:UADA", "<@UBOB>", "/approve", "/deny", "/new", "UTC", "PM",
                 "AM", "fs_write", "Create notes.txt (12 bytes)", "`git` cmd")


@pytest.mark.parametrize("language", sorted(RENDERERS))
def test_a_slack_card_its_outcomes_and_batch_pages_fit_and_speak_only_catalog_words(language):
    from channels.slack import approvals as sl_cards
    from channels.slack import batch as sl_batch
    from tests.fakes.slack_server import block_problem

    tr = RENDERERS[language]
    card = sl_cards.request_card(slack_view(), tr)
    shown = [*slack_shown(card.blocks), card.part.plain, card.part.mrkdwn]
    assert block_problem(card.blocks) is None
    for choice in ("approve", "deny", "always", "expire"):
        blocks, part = sl_cards.outcome_card(slack_view(), choice, "slack:UBOB", NOW, tr)
        assert block_problem(blocks) is None
        shown += [*slack_shown(blocks), part.plain]
    views = [slack_view(n, summary=f"ls {n} " + "é" * 9000, batch="B" * 16) for n in range(9)]
    for page in sl_batch.pages(views, tr):
        for calls in ([CallOutcome(v, "") for v in page.calls],
                      [CallOutcome(v, "deny", "slack:UBOB", NOW) for v in page.calls]):
            blocks = sl_batch.page_blocks(page, calls, len(views), True, tr)
            assert block_problem(blocks) is None and len(blocks) + len(calls) <= 50
            shown += [*slack_shown(blocks), sl_batch.page_part(page, calls, len(views), tr).plain]
    if language == "pseudo":
        allowed = (*SLACK_CONTENT, *(v.id for v in views), *(v.summary for v in views))
        for text in shown:
            assert unmarked_words(text, allowed) == [], text


def wa_view(n: int = 0, summary: str = "Create notes.txt (12 bytes)", always: str = "`git` cmd",
            batch: str = "") -> ApprovalView:
    return ApprovalView(id=f"{n:016d}", tool="fs_write", risk="medium", summary=summary,
                        sender="whatsapp:393470000001", chat="393470000001", channel="whatsapp",
                        args={}, expires_at=NOW + 300, always=always, batch=batch, position=n)


@pytest.mark.parametrize("language", sorted(RENDERERS))
def test_a_whatsapp_card_fits_its_limits_in_every_language_without_cutting_a_word(language):
    """Body 1,024, reply-button titles 20, list rows 24, the list's button 20, its header 60:
    each translation fits whole (a title cut to fit would read as a different word)."""
    from channels.whatsapp import approvals as wa_cards
    from channels.whatsapp.sink import notice_buttons

    tr = RENDERERS[language]
    for summary in ("Create notes.txt", "rm -rf ./build && " * 100, "x" * 5000):
        for number, total in ((0, 0), (7, 9)):
            card = wa_cards.card(wa_view(summary=summary), tr, number, total)["interactive"]
            assert len(card["body"]["text"]) <= wa_cards.BODY_LIMIT
            titles = [b["reply"]["title"] for b in card["action"]["buttons"]]
            assert titles == [tr._("Approve"), tr._("Deny"), tr._("Always")]
            assert all(len(title) <= wa_cards.TITLE_LIMIT for title in titles)
    views = tuple(wa_view(n, batch="B" * 16) for n in range(9))
    listing = wa_cards.batch_list(views, tr)["interactive"]
    rows = [row["title"] for s in listing["action"]["sections"] for row in s["rows"]]
    assert rows == [tr._("Approve all"), tr._("Deny all")]
    assert all(len(row) <= wa_cards.ROW_TITLE_LIMIT for row in rows)
    assert listing["action"]["button"] == tr._("Answer all") and len(tr._("Answer all")) <= 20
    assert len(listing["action"]["sections"][0]["title"]) <= wa_cards.ROW_TITLE_LIMIT
    assert len(listing["header"]["text"]) <= 60 and len(listing["body"]["text"]) <= 1024
    choose = notice_buttons("x" * 2000, (Button("/a", "A"),) * 4, tr)["interactive"]
    assert choose["action"]["button"] == tr._("Choose:") and len(tr._("Choose:")) <= 20
    if language == "pseudo":
        texts = [wa_cards.card_body(wa_view(), tr), wa_cards.card_fallback(wa_view(), tr, 1, 2),
                 wa_cards.preview_message(wa_view(), tr), listing["body"]["text"],
                 wa_cards.batch_heading_text(views, tr)]
        texts += [wa_cards.outcome_line(c, "whatsapp:393470000002", NOW, tr)
                  for c in ("approve", "deny", "always", "expire")]
        allowed = ("fs_write", "Create notes.txt (12 bytes)", "`git` cmd", "whatsapp:", "/approve", "/deny",
                   "/new", "UTC", "PM", "AM", f"{0:016d}")
        for text in texts:
            assert unmarked_words(text, allowed) == [], text


def test_a_tool_without_a_preview_says_so_in_the_readers_words_on_slack_and_whatsapp():
    from bot.core.tool import NO_PREVIEW
    from channels.slack import approvals as sl_cards
    from channels.whatsapp import approvals as wa_cards
    from tests.fakes.slack_server import visible_text
    from tests.support.languages import IT

    slack = visible_text({"blocks": sl_cards.request_card(slack_view(summary=NO_PREVIEW),
                                                          IT).blocks})
    assert "(anteprima non disponibile per questo strumento)" in slack
    assert "(anteprima non disponibile per questo strumento)" in wa_cards.card_body(
        wa_view(summary=NO_PREVIEW), IT)
    assert "  keep my indentation" in wa_cards.card_body(wa_view(summary="  keep my indentation"),
                                                         IT)
