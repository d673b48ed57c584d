"""A preview's own words are a message, its content is data: each reader sees "Crea nota.txt"
or "Crear nota.txt" around the exact diff, on a card made now or redrawn after a restart; a
preview that held a secret is shown scrubbed, as text, in every language."""

from __future__ import annotations

import json

import pytest

from bot.approvals.records import summary_of
from bot.core.approval_cards import ApprovalNeeded, preview_text
from bot.core.events import CollectingSink, IncomingMessage
from bot.language.phrase import Number, Phrase, phrase_data, phrase_from
from tests.fakes.anthropic_server import tool_use
from tests.support.languages import EN, ES, IT, PSEUDO, unmarked_words
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()


def test_a_phrase_comes_back_from_its_data_with_its_message_and_values():
    phrase = Phrase("Overwrite {path} ({old} → {size}, {lines})", path="a {x}.txt", old="1 KB",
                    size="2 KB", lines=Phrase("+{added} −{removed} lines", added=3, removed=1))
    again = phrase_from(json.loads(json.dumps(phrase_data(phrase))))
    assert isinstance(again, Phrase) and again == phrase
    assert IT.say(again) == "Sovrascrivi a {x}.txt (1 KB → 2 KB, +3 −1 righe)"
    assert phrase_from(phrase_data(Number(3.5))) == Number(3.5)
    assert phrase_from({"msgid": "{gone}", "values": {}}) == "{gone}"   # placeholders changed


@pytest.mark.parametrize("stored, text, kept", [
    (json.dumps(phrase_data(Phrase("Create {path} ({size})", path="n.txt", size="5 B"))),
     "Create n.txt (5 B)", True),
    (json.dumps(phrase_data(Phrase("Create {path} ({size})", path="n.txt", size="5 B"))),
     "Create [REDACTED] (5 B)", False),           # the text shown was not the message's
    ("{not json", "Create n.txt (5 B)", False),
    (None, "Create n.txt (5 B)", False),
])
def test_a_stored_preview_is_a_message_again_only_when_it_renders_to_the_text_shown(
        stored, text, kept):
    summary = summary_of({"summary_data": stored, "summary": text})
    assert summary == text and isinstance(summary, Phrase) is kept


async def asked_to_write(app_factory, fake_anthropic) -> tuple:
    """A supervised sender's fs_write of nota.txt, waiting for approval: (app, ApprovalNeeded)."""
    app = await app_factory({"senders": {"telegram:7": "supervised"}})
    fake_anthropic.script(tool_use("fs_write", {"path": "nota.txt", "content": "latte\n"}))
    sink = CollectingSink()
    await app.agent.handle(IncomingMessage("telegram:7", "7", "scrivi", channel="telegram"), sink)
    (asked,) = sink.of(ApprovalNeeded)
    return app, asked


async def test_a_card_is_in_each_readers_words_around_the_exact_diff_before_and_after_a_restart(
        app_factory, fake_anthropic):
    app, asked = await asked_to_write(app_factory, fake_anthropic)
    now = asked.approval.summary
    stored = (await app.services.approvals.get(asked.approval.id)).summary
    for summary in (now, stored):
        assert isinstance(summary, Phrase)
        assert preview_text(summary, IT).startswith("Crea nota.txt (")
        assert preview_text(summary, ES).startswith("Crear nota.txt (")
        assert preview_text(summary, EN) == str(summary)
        assert "+latte" in preview_text(summary, IT)
        assert unmarked_words(PSEUDO.say(summary), ("nota", "txt", "latte", "dev", "null",
                                                    "b")) == []


async def test_a_preview_that_held_a_secret_is_the_scrubbed_text_in_every_language(
        app_factory, fake_anthropic):
    secret = "sk-live-Q7x9Zr2Lm4Pw8Kd1"
    app = await app_factory({"senders": {"telegram:7": "supervised"}})
    (app.config.workspace / ".env").write_text(f"API_KEY={secret}\n")
    fake_anthropic.script(tool_use("fs_write", {"path": "k.txt", "content": f"{secret}\n"}))
    sink = CollectingSink()
    await app.agent.handle(IncomingMessage("telegram:7", "7", "write", channel="telegram"), sink)
    (asked,) = sink.of(ApprovalNeeded)
    summary = (await app.services.approvals.get(asked.approval.id)).summary
    assert secret not in summary and not isinstance(summary, Phrase)
    assert "[REDACTED]" in summary
    assert all(secret not in preview_text(summary, tr) for tr in (EN, IT, ES))


async def test_what_an_always_covers_is_in_each_readers_words_on_the_card_and_the_grant(
        app_factory, fake_anthropic):
    from bot.approvals.grants import Scope

    app, asked = await asked_to_write(app_factory, fake_anthropic)
    stored = await app.services.approvals.get(asked.approval.id)
    for always in (asked.approval.always, stored.view().always):
        assert str(always) == "files in the workspace root in this chat"
        assert IT.say(always) == "i file nella cartella principale in questa chat"
        assert ES.say(always) == "los archivos de la carpeta principal en este chat"
    async with app.services.store.transaction() as tx:
        await app.services.approvals.grants.add(
            tx, session_id="s1", sender="telegram:7", tool="fs_write", scope=stored.scope,
            risk="medium", by="telegram:7")
        await app.services.approvals.grants.add(
            tx, session_id="s1", sender="telegram:7", tool="shell_run",
            scope=Scope("programs:git", "`git`"), risk="medium", by="telegram:7")
    labels = {g.tool: g.scope_label for g in await app.services.approvals.grants.listing()}
    assert IT.say(labels["fs_write"]) == "i file nella cartella principale"
    assert labels["shell_run"] == "`git`" and not isinstance(labels["shell_run"], Phrase)
