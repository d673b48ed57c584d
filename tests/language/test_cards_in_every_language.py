"""Every approval card, batch page and outcome, rendered in each language (and in a
pseudo-language that marks every catalog message): within the platform's limits, and without a
word that bypassed the catalog (only content — tool names, previews, ids, senders — is left)."""

from __future__ import annotations

import pytest

from bot.core.events import ApprovalView, CallOutcome
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
