"""One gate for every paid call (bot.money.gate): model turns, summaries, supra_llm and
transcription apply the caller's own limits, are refused before the call when over budget and
record their cost in `usage`. The last test lists every place that calls a paid service and
fails for one that does not go through the gate."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bot.core.events import AudioPart, CollectingSink, IncomingMessage, Notice
from bot.core.identity import Level, Sender
from bot.core.ports import Payer
from bot.money.budgets import BudgetExceeded
from tests.fakes.anthropic_server import text
from tests.fakes.stt_server import FakeSTT
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()

ROOT = Path(__file__).resolve().parents[2]
SENDERS = {"telegram:7": "full", "telegram:8": "read_only"}


@pytest.fixture
async def stt():
    async with FakeSTT(transcript="call the plumber") as fake:
        yield fake


async def gated_app(app_factory, stt: FakeSTT | None = None, **budgets):
    overrides = {"senders": SENDERS, "budgets": {"sender_daily": 1.0, "sender_monthly": 0,
                                                  "global_daily": 0, **budgets}}
    if stt is not None:
        overrides["media"] = {"transcription": {"base_url": stt.base_url, "model": "whisper-t",
                                                "price_per_minute": 0.6}}
    return await app_factory(overrides)


async def spent(app, sender: str, dollars: float) -> None:
    await app.services.spend.record(session_id="earlier", sender=sender, model="whisper-t",
                                    usage={}, cost=dollars)


def voice(sender: str, data: bytes = b"OggS" + b"v" * 11_996) -> IncomingMessage:
    return IncomingMessage(sender=sender, chat=sender.split(":")[1], text="", channel="telegram",
                           parts=(AudioPart(data, "voice.ogg", "audio/ogg"),))


async def usage_rows(app, sender: str) -> list[tuple[str, float]]:
    rows = await app.services.store.fetchall(
        "SELECT model, cost FROM usage WHERE sender = ? AND session_id <> 'earlier' ORDER BY id",
        (sender,))
    return [(r["model"], round(float(r["cost"] or 0), 6)) for r in rows]


async def test_a_voice_note_from_a_sender_over_budget_never_reaches_the_transcription_service(
        app_factory, fake_anthropic, stt):
    app = await gated_app(app_factory, stt)
    await spent(app, "telegram:7", 1.0)
    sink = CollectingSink()
    await app.agent.handle(voice("telegram:7"), sink)
    assert stt.requests == [] and fake_anthropic.requests == []
    (notice,) = [n.text for n in sink.of(Notice)]
    assert "couldn't transcribe" in notice and "today's model budget" in notice
    assert await usage_rows(app, "telegram:7") == []


async def test_a_transcription_is_recorded_in_usage_with_its_cost_before_the_turn_goes_on(
        app_factory, fake_anthropic, stt):
    app = await gated_app(app_factory, stt)
    fake_anthropic.script(text("Noted."))
    sink = CollectingSink()
    await app.agent.handle(voice("telegram:7"), sink)   # 12,000 bytes: six seconds of voice
    assert sink.text == "Noted." and len(stt.requests) == 1
    rows = await usage_rows(app, "telegram:7")
    assert rows[0] == ("whisper-t", 0.06)               # $0.60 a minute, six seconds
    assert len(rows) == 2                               # then the model turn's own row


async def test_a_transcription_counts_toward_the_limit_of_the_next_call(
        app_factory, fake_anthropic, stt):
    app = await gated_app(app_factory, stt, sender_daily=0.05)
    sink = CollectingSink()
    await app.agent.handle(voice("telegram:7"), sink)   # $0.06: over the $0.05 limit now
    assert len(stt.requests) == 1 and fake_anthropic.requests == []
    assert any("today's model budget" in str(e) for e in sink.events)


async def test_supra_llm_is_refused_before_the_call_at_the_senders_level_limit(
        app_factory, fake_anthropic):
    app = await gated_app(app_factory, sender_daily=0,
                          levels={"read_only": 0.5, "supervised": 0, "full": 0})
    await spent(app, "telegram:8", 3.0)   # six times over the read_only level's limit
    with pytest.raises(BudgetExceeded) as refused:
        await app.services.ports.model.ask(
            sender=Sender.parse("telegram:8"), level=Level.READ_ONLY, session_id="s",
            model="claude-opus-5-5", prompt="hard question", system="", max_tokens=100)
    assert "levels.read_only" in refused.value.user_message
    assert fake_anthropic.requests == []


async def test_a_side_question_records_its_cost_under_the_callers_session(
        app_factory, fake_anthropic):
    app = await gated_app(app_factory)
    fake_anthropic.script(text("42"))
    answer = await app.services.ports.model.ask(
        sender=Sender.parse("telegram:7"), level=Level.FULL, session_id="s-supra",
        model="claude-opus-5-5", prompt="q", system="", max_tokens=100)
    assert answer.text == "42"
    row = await app.services.store.fetchone(
        "SELECT session_id, sender, cost FROM usage WHERE session_id = 's-supra'")
    assert row["sender"] == "telegram:7" and float(row["cost"]) > 0


async def test_the_gate_records_a_call_that_failed_after_it_was_charged(app_factory):
    app = await gated_app(app_factory)
    with pytest.raises(RuntimeError):
        async with app.services.paid.call(Payer("telegram:7", "full", "s-tts"), "speech") as bill:
            bill.charge("tts-test", cost=0.25)
            raise RuntimeError("the engine failed after the service answered")
    async with app.services.paid.call(Payer("telegram:7", "full", "s-tts"), "speech"):
        pass   # charged nothing: no row
    rows = await app.services.store.fetchall(
        "SELECT model, cost FROM usage WHERE session_id = 's-tts'")
    assert [(r["model"], float(r["cost"])) for r in rows] == [("tts-test", 0.25)]


# --- every paid call site goes through the gate -----------------------------------------------

# The methods that reach a paid service, and every place allowed to call them, with what
# gates it there. A new call site (a new provider call, a speech engine called directly) fails
# until it goes through bot.money.gate and is listed here.
PAID_METHODS = frozenset({"complete", "transcribe", "speak", "synthesize", "synthesise"})
GATED_SITES = {
    # model turns and side questions: LLMClient.create admits, ask admits and records
    ("bot/llm/client.py", "_call"): "LLMClient.create / ask (gate.admit, gate.call)",
    # voice notes: inside `async with self.paid.call(...)`
    ("bot/media/intake.py", "_transcribed"): "PaidCalls.call",
    # voice replies: a priced engine speaks inside `async with paid.call(...)`; espeak-ng (no
    # priced model) is free and skips the gate
    ("bot/runtime/voice.py", "_speak"): "PaidCalls.call (priced engines)",
    # the engine's own synthesis, reached only from Speaker.speak, itself only from _speak
    ("bot/media/speech/engine.py", "speak"): "through voice._speak",
    # `myclaw doctor --online`: the operator's five-token probe of each model, from the
    # terminal, with no sender whose budget it could count against
    ("bot/ops/cli/models.py", "_ask"): "operator's probe (no sender)",
}
SDK_MODULES = {"anthropic": {"bot/llm/anthropic_provider.py"},
               "openai": {"bot/llm/compat/provider.py"}}


def _sources() -> list[Path]:
    return [p for folder in ("bot", "channels", "tools") for p in (ROOT / folder).rglob("*.py")]


def _paid_calls(tree: ast.AST) -> list[tuple[str, int]]:
    """(enclosing function, line) of every call of a paid method in a module."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) \
                else function
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) \
                    and child.func.attr in PAID_METHODS:
                found.append((name, child.lineno))
            visit(child, name)
    visit(tree, "<module>")
    return found


def test_every_call_of_a_paid_service_is_a_listed_site_behind_the_gate():
    unlisted, seen = [], set()
    for path in _sources():
        relative = path.relative_to(ROOT).as_posix()
        for function, line in _paid_calls(ast.parse(path.read_text())):
            if (relative, function) in GATED_SITES:
                seen.add((relative, function))
            elif not relative.startswith("bot/llm/") or function != "complete":
                unlisted.append(f"{relative}:{line} in {function}()")
    assert unlisted == [], ("a paid call outside the gate (bot.money.gate); route it through "
                            f"PaidCalls.call and list it in GATED_SITES: {unlisted}")
    assert seen == set(GATED_SITES), "a listed site is gone: update GATED_SITES"


def test_only_the_provider_modules_import_a_model_sdk():
    for path in _sources():
        relative = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                sdk = name.split(".")[0]
                if sdk in SDK_MODULES:
                    assert relative in SDK_MODULES[sdk], f"{relative} imports {name}"


def test_the_paid_call_sites_in_the_client_are_only_reached_through_an_admission():
    """LLMClient: `_call` (the provider call) is reached from `_complete` only, and that from
    `create` (after gate.admit) and `ask` (inside gate.call)."""
    tree = ast.parse((ROOT / "bot/llm/client.py").read_text())
    callers: dict[str, set[str]] = {}
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    callers.setdefault(node.func.attr, set()).add(function.name)
    assert callers["_complete"] == {"create", "ask"}
    assert callers["_call"] == {"_complete", "_with_fallbacks"}
    assert callers["_with_fallbacks"] == {"_complete"}
    assert callers["admit"] >= {"create"} and callers["call"] >= {"ask"}
