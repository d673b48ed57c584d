"""Through the real runtime: a secret value that a tool result carries — a copy of a .env made
earlier, the bot's own API key in a file — reaches neither the model, nor the chat, nor the
store, nor the log; and an approved read of a secret file shows it redacted."""

from __future__ import annotations

import json
import logging

from bot.core.approval_cards import ApprovalNeeded
from bot.core.events import CollectingSink, IncomingMessage
from tests.conftest import FAKE_ENV
from tests.fakes.anthropic_server import text, tool_use
from tests.support.runtime_tools import answer

VALUE = "sk-live-Q7x9Zr2Lm4Pw8Kd1"
OWN_KEY = FAKE_ENV["ANTHROPIC_API_KEY"]


def message(text_: str, sender: str = "telegram:7") -> IncomingMessage:
    return IncomingMessage(sender=sender, chat="7", text=text_, channel="telegram")


def sent_to_model(fake) -> str:
    return "".join(json.dumps(r.json, ensure_ascii=False) for r in fake.requests)


async def stored_text(app) -> str:
    rows = []
    for table in ("receipts", "undo_log", "audit", "messages", "approvals"):
        try:
            rows += await app.services.store.fetchall(f"SELECT * FROM {table}")
        except Exception:   # a table this store does not have
            continue
    return repr([dict(r) for r in rows])


async def test_a_copied_secret_and_the_bots_own_key_never_leave_a_tool_call(
        app_factory, fake_anthropic, caplog):
    app = await app_factory({"senders": {"telegram:7": "full"}})
    ws = app.config.workspace
    (ws / ".env").write_text(f"API_KEY={VALUE}\n")
    (ws / "notes.txt").write_text(f"copied earlier: {VALUE}\nown key: {OWN_KEY}\n")
    fake_anthropic.script(tool_use("fs_read", {"path": "notes.txt"}),
                          tool_use("shell_run", {"command": "cat notes.txt"}), text("done"))
    sink = CollectingSink()
    with caplog.at_level(logging.DEBUG):
        await app.agent.handle(message("show my notes"), sink)
    sent = sent_to_model(fake_anthropic)
    assert "copied earlier: [REDACTED]" in sent
    for secret in (VALUE, OWN_KEY):
        assert secret not in sent
        assert secret not in repr(sink.events)
        assert secret not in await stored_text(app)
        assert secret not in caplog.text


async def test_an_approved_read_of_a_secret_file_asks_naming_it_and_shows_it_redacted(
        app_factory, fake_anthropic):
    app = await app_factory({"senders": {"telegram:7": "full"}})
    (app.config.workspace / ".env").write_text(f"API_KEY={VALUE}\nDEBUG=true\n")
    fake_anthropic.script(tool_use("fs_read", {"path": ".env"}))
    sink = CollectingSink()
    await app.agent.handle(message("what is in .env?"), sink)
    (needed,) = sink.of(ApprovalNeeded)
    assert needed.approval.risk == "high" and ".env" in needed.approval.summary
    assert VALUE not in needed.approval.summary
    fake_anthropic.script(text("it has API_KEY and DEBUG"))
    follow = CollectingSink()
    assert (await answer(app.agent, needed.approval.id, "telegram:7", "approve", follow)).ok
    await app.agent.queue.drain(5)
    sent = sent_to_model(fake_anthropic)
    assert "API_KEY=[REDACTED]" in sent and "DEBUG=true" in sent and VALUE not in sent
    assert VALUE not in await stored_text(app)


async def test_a_supervised_sender_is_refused_a_secret_file_and_a_history_reader(
        app_factory, fake_anthropic):
    app = await app_factory({"senders": {"telegram:7": "supervised"}})
    (app.config.workspace / ".env").write_text(f"API_KEY={VALUE}\n")
    fake_anthropic.script(tool_use("fs_read", {"path": ".env"}),
                          tool_use("shell_run", {"command": "git show HEAD:.env"}), text("ok"))
    sink = CollectingSink()
    await app.agent.handle(message("read it"), sink)
    assert sink.of(ApprovalNeeded) == []
    assert VALUE not in sent_to_model(fake_anthropic)
    audit = await app.services.store.fetchall(
        "SELECT tool, decision FROM audit WHERE outcome != 'started' ORDER BY id")
    assert [(r["tool"], r["decision"]) for r in audit] == [("fs_read", "deny"), ("shell_run", "deny")]


async def test_a_link_to_a_secret_file_in_a_members_own_folder_asks_naming_the_secret(
        app_factory, fake_anthropic):
    """The dispatcher rates the call where it runs: the member's folder (per_sender), whose
    notes/soft.txt is a symlink to their .env: asked at high risk, and even where high-risk
    calls may get an "Always", it would cover this one call only, as for .env itself."""
    app = await app_factory({"senders": {"telegram:7": "full"},
                             "agent": {"workspace_mode": "per_sender"},
                             "profiles": {"default": {"always_max_risk": "high"}}})
    own = app.config.workspace / "telegram_7"
    (own / "notes").mkdir(parents=True)
    (own / ".env").write_text(f"API_KEY={VALUE}\n")
    (own / "notes" / "soft.txt").symlink_to("../.env")
    fake_anthropic.script(tool_use("fs_read", {"path": "notes/soft.txt"}))
    sink = CollectingSink()
    await app.agent.handle(message("read my notes/soft.txt"), sink)
    (needed,) = sink.of(ApprovalNeeded)
    assert needed.approval.risk == "high" and "this exact fs_read call" in needed.approval.always
    assert ".env" in needed.approval.summary and VALUE not in needed.approval.summary
