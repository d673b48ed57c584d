"""Nothing the bot says is built from English outside the catalog: every Notice, ErrorEvent and
Button made in the bot or a channel, every tool failure's message and progress line (shown on
the call's status line), every refused attachment's reason and every answer of a function that
says it returns a Phrase (/undo's) carries a catalog message (`tr._`, `tr.ngettext`, a
`Phrase`) or content (a variable: a tool's preview, a name), never a sentence written in the
code. An AST scan, so a new English notice fails here before anyone reads it in Italian."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAID = {"Notice": ("text",), "ErrorEvent": ("message",), "Button": ("label",)}
# A tool's failure is shown on the call's status line: its message is said to a person too.
FAILURES = {name: ("message",) for name in (
    "ToolException", "ToolInvalidArgsError", "ToolNotFoundError", "ToolPermissionError",
    "ToolNetworkError", "ToolExternalError", "ToolQuotaError", "ToolUnsupportedError",
    "UnrevertibleError", "MediaRefused")}   # and why an attachment cannot be used
# A tool's progress (`ctx.progress(...)`) is on the status line too.
PROGRESS = {"progress": ("text",)}
WORD = re.compile(r"[A-Za-z]{2,}")


def literal_words(node: ast.AST) -> list[str]:
    """English words written into an expression itself (string constants, f-string text,
    concatenations) — not those a call or a variable brings."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return WORD.findall(node.value)
    if isinstance(node, ast.JoinedStr):
        return [w for part in node.values if isinstance(part, ast.Constant)
                for w in WORD.findall(part.value)]
    if isinstance(node, ast.BinOp):
        return literal_words(node.left) + literal_words(node.right)
    if isinstance(node, ast.IfExp):
        return literal_words(node.body) + literal_words(node.orelse)
    return []


def said_outside_the_catalog(path: Path, root: Path = ROOT,
                             said_by: dict[str, tuple[str, ...]] = SAID) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if name not in said_by:
            continue
        said = [*node.args[:1], *(k.value for k in node.keywords if k.arg in said_by[name])]
        for value in said:
            words = literal_words(value)
            if words:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {' '.join(words)}")
    return found


def phrases_returned_in_english(path: Path, root: Path = ROOT) -> list[str]:
    """The English sentences a function annotated `-> Phrase` returns as plain text."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or \
                "Phrase" not in ast.unparse(node.returns or ast.Constant(None)):
            continue
        for inner in ast.walk(node):
            words = literal_words(inner.value) if isinstance(inner, ast.Return) and \
                inner.value is not None else []
            if words:
                found.append(f"{path.relative_to(root)}:{inner.lineno}: {' '.join(words)}")
    return found


def sources() -> list[Path]:
    return [path for folder in ("bot", "channels") for path in sorted((ROOT / folder).rglob("*.py"))]


def test_no_notice_error_or_button_is_written_in_english_in_the_code():
    found = [line for path in sources() for line in said_outside_the_catalog(path)]
    assert found == []


def test_no_tool_failure_is_written_in_english_in_the_code():
    # The contract (bot/core) imports no words: its one message, for a port a process has not
    # wired, is given the person's words by bot.toolbox.failures.
    paths = [p for folder in ("bot", "tools") for p in sorted((ROOT / folder).rglob("*.py"))
             if not p.is_relative_to(ROOT / "bot" / "core")]
    found = [line for path in paths for line in said_outside_the_catalog(path, said_by=FAILURES)]
    assert found == []


def test_no_progress_line_is_written_in_english_in_the_code():
    paths = [p for folder in ("bot", "channels", "tools") for p in sorted((ROOT / folder).rglob("*.py"))]
    found = [line for path in paths for line in said_outside_the_catalog(path, said_by=PROGRESS)]
    assert found == []


def test_the_scan_finds_an_english_progress_line(tmp_path):
    planted = tmp_path / "tool.py"
    planted.write_text('await ctx.progress(f"Asking {model}…")\n'
                       'await ctx.progress(Phrase("Asking {model}…", model=model))\n'
                       'await ctx.progress(message or f"{done:g}/{total:g}")\n')
    assert said_outside_the_catalog(planted, tmp_path, PROGRESS) == ["tool.py:1: Asking"]


def test_no_function_that_answers_with_a_phrase_returns_english_text():
    paths = [p for folder in ("bot", "channels", "tools") for p in sorted((ROOT / folder).rglob("*.py"))]
    found = [line for path in paths for line in phrases_returned_in_english(path)]
    assert found == []


def test_the_scan_finds_english_returned_for_a_phrase(tmp_path):
    planted = tmp_path / "undo.py"
    planted.write_text('async def undo_last() -> Phrase:\n    if x:\n        return f"Undone: {x}."\n'
                       '    return Phrase("Nothing to undo.")\n'
                       'def label() -> str:\n    return "the file"\n')
    assert phrases_returned_in_english(planted, tmp_path) == ["undo.py:3: Undone"]


def test_the_scan_finds_an_english_sentence_sent_to_a_person(tmp_path):
    planted = tmp_path / "notices.py"
    planted.write_text('Notice(f"Your job {name} ran.")\nNotice(tr._("Fine"))\n'
                       'Button(label="Cancel it", command="/x")\nNotice(f"⏰ {name}")\n')
    assert said_outside_the_catalog(planted, tmp_path) == [
        "notices.py:1: Your job ran", "notices.py:3: Cancel it"]
