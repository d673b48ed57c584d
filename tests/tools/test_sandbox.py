"""The workspace sandbox refuses every hostile path and lets ordinary workspace paths through."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from bot.config import settings as config_mod
from bot.core.identity import Sender
from bot.core.tool import CallContext, ToolException, ToolNotFoundError, ToolPermissionError
from tests.conftest import FAKE_ENV, make_config
from tools._sandbox import (
    display_path,
    read_regular_file,
    resolve_in_workspace,
    write_atomic,
)


@pytest.fixture
def hostile(tmp_path: Path) -> CallContext:
    """A workspace holding the bot's data dir, config, custom tools and .env files, plus traps."""
    ws = tmp_path / "workspace"
    data = ws / "db"
    ws.mkdir()
    cfg = config_mod.from_dict(
        {"agent": {"workspace": str(ws)}, "store": {"path": str(data / "myclaw.db")},
         "tools": {"custom_paths": [str(ws / "mytools")]}},
        source=ws / "myclaw.toml", env=dict(FAKE_ENV))
    data.mkdir(parents=True)
    for name in ("myclaw.db", "myclaw.db-wal", "receipt.key", "other.bin"):
        (data / name).write_text("secret")
    (ws / "myclaw.toml").write_text("[agent]\n")
    (ws / ".env").write_text("ANTHROPIC_API_KEY=sk-real")
    (ws / "sub").mkdir()
    (ws / "sub" / ".env.local").write_text("TOKEN=1")
    (tmp_path / "outside.txt").write_text("outside")
    (tmp_path / "outside_dir").mkdir()
    (ws / "link_out").symlink_to(tmp_path / "outside.txt")
    (ws / "dir_out").symlink_to(tmp_path / "outside_dir")
    (ws / "loop1").symlink_to(ws / "loop2")
    (ws / "loop2").symlink_to(ws / "loop1")
    (ws / "devnull").symlink_to("/dev/null")
    (ws / "innocent.txt").symlink_to(ws / ".env")
    (ws / "db_alias").symlink_to(data)
    os.mkfifo(ws / "pipe")
    os.link(data / "myclaw.db", ws / "hardlink.db")
    return CallContext(sender=Sender.parse("telegram:1"), workspace=cfg.workspace, settings=cfg)


OUTSIDE, LOOP, PROTECTED = "resolves outside the workspace", "symlink loop", "protected files"
# (path, why it is refused): {tmp} is the test's temp dir, {ws} the workspace.
HOSTILE_PATHS = [
    ("../outside.txt", OUTSIDE),
    ("notes/../../outside.txt", OUTSIDE),
    ("/etc/passwd", OUTSIDE),
    ("/dev/null", OUTSIDE),
    ("{tmp}/outside.txt", OUTSIDE),
    ("{ws}/../outside.txt", OUTSIDE),
    ("link_out", OUTSIDE),
    ("dir_out/new.txt", OUTSIDE),
    ("loop1", LOOP),
    ("loop1/x", LOOP),
    ("a\x00b.txt", "NUL byte"),
    ("pipe", "not a regular file"),
    ("devnull", OUTSIDE),
    ("db/myclaw.db", PROTECTED),
    ("db/myclaw.db-wal", PROTECTED),
    ("db/myclaw.db-shm", PROTECTED),
    ("db/receipt.key", PROTECTED),
    ("db/other.bin", PROTECTED),
    ("db", PROTECTED),
    ("db_alias/myclaw.db", PROTECTED),
    ("{ws}/db/myclaw.db", PROTECTED),
    ("hardlink.db", PROTECTED),
    ("myclaw.toml", PROTECTED),
    (".env", PROTECTED),
    ("sub/.env.local", PROTECTED),
    ("sub/.env", PROTECTED),
    (".env/anything", PROTECTED),
    ("innocent.txt", PROTECTED),
    ("sub/.ENV", PROTECTED),
    ("mytools/evil.py", PROTECTED),
    ("mytools", PROTECTED),
]


@pytest.mark.parametrize("for_write", [False, True], ids=["read", "write"])
@pytest.mark.parametrize(("raw", "why"), HOSTILE_PATHS)
def test_every_hostile_path_is_refused_with_a_hint_naming_the_workspace(hostile, tmp_path, raw, why,
                                                                         for_write):
    path = raw.format(tmp=tmp_path, ws=hostile.workspace)
    with pytest.raises(ToolPermissionError, match=why) as caught:
        resolve_in_workspace(hostile, path, must_exist=False, for_write=for_write)
    error = caught.value.to_error()
    assert error.kind == "permission_denied"
    assert str(hostile.workspace) in error.llm_hint
    assert "\x00" not in error.message


def test_a_unix_socket_in_the_workspace_is_refused(hostile):
    # Unix socket paths are limited to ~108 bytes: bind through a short relative name.
    cwd = os.getcwd()
    os.chdir(hostile.workspace)
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind("sock")
            with pytest.raises(ToolPermissionError, match="not a regular file"):
                resolve_in_workspace(hostile, "sock", must_exist=True, for_write=False)
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize(("raw", "expected"), [
    ("notes/a.md", "notes/a.md"),
    ("./notes/a.md", "notes/a.md"),
    ("notes/../a.md", "a.md"),
    ("{ws}/notes/a.md", "notes/a.md"),
    ("new/deeper/file.txt", "new/deeper/file.txt"),
    ("my.env", "my.env"),
    (".envrc", ".envrc"),
    ("environment/.envious", "environment/.envious"),
    ("inside_link", "notes/a.md"),
    (".", "."),
])
def test_ordinary_workspace_paths_resolve_inside_it(hostile, raw, expected):
    notes = hostile.workspace / "notes"
    notes.mkdir(exist_ok=True)
    (notes / "a.md").write_text("hi")
    if not (hostile.workspace / "inside_link").is_symlink():
        (hostile.workspace / "inside_link").symlink_to(notes / "a.md")
    real = resolve_in_workspace(hostile, raw.format(ws=hostile.workspace), must_exist=False,
                                for_write=True)
    assert display_path(hostile, real) == expected


def test_a_workspace_reached_through_a_symlink_accepts_absolute_paths_through_either_name(tmp_path):
    real_ws = tmp_path / "real_ws"
    real_ws.mkdir()
    (real_ws / "a.txt").write_text("x")
    (tmp_path / "ws_link").symlink_to(real_ws)
    ctx = CallContext(workspace=tmp_path / "ws_link")
    for raw in ("a.txt", str(tmp_path / "ws_link" / "a.txt"), str(real_ws / "a.txt")):
        assert resolve_in_workspace(ctx, raw, must_exist=True, for_write=False) == real_ws / "a.txt"


def test_a_missing_file_is_not_found_and_the_hint_suggests_glob_list(hostile):
    with pytest.raises(ToolNotFoundError) as caught:
        resolve_in_workspace(hostile, "nope.txt", must_exist=True, for_write=False)
    assert "glob_list" in caught.value.llm_hint
    assert caught.value.details == {"path_attempted": "nope.txt"}


def test_writing_below_a_file_is_refused_with_a_clear_message(hostile):
    (hostile.workspace / "plain.txt").write_text("x")
    with pytest.raises(ToolException, match=r"plain\.txt is not a directory"):
        resolve_in_workspace(hostile, "plain.txt/child.txt", must_exist=False, for_write=True)


def test_the_store_outside_the_workspace_stays_unreachable_through_a_hard_link(tmp_path):
    cfg = make_config(tmp_path)
    cfg.store_path.parent.mkdir(parents=True)
    cfg.store_path.write_text("db")
    os.link(cfg.store_path, cfg.workspace / "copy.db")
    ctx = CallContext(workspace=cfg.workspace, settings=cfg)
    with pytest.raises(ToolPermissionError, match="protected"):
        resolve_in_workspace(ctx, "copy.db", must_exist=True, for_write=False)


# --- the check-then-use race --------------------------------------------------------------


def test_a_directory_swapped_for_an_outside_symlink_after_the_check_is_not_written_through(
        hostile, tmp_path):
    (hostile.workspace / "swap").mkdir()
    real = resolve_in_workspace(hostile, "swap/new.txt", must_exist=False, for_write=True)
    (hostile.workspace / "swap").rename(hostile.workspace / "swap_old")
    (hostile.workspace / "swap").symlink_to(tmp_path / "outside_dir")
    with pytest.raises(ToolPermissionError, match="symlink"):
        write_atomic(hostile, real, b"payload")
    assert list((tmp_path / "outside_dir").iterdir()) == []


def test_a_file_swapped_for_an_outside_symlink_after_the_check_is_not_read(hostile, tmp_path):
    (hostile.workspace / "note.txt").write_text("mine")
    real = resolve_in_workspace(hostile, "note.txt", must_exist=True, for_write=False)
    (hostile.workspace / "note.txt").unlink()
    (hostile.workspace / "note.txt").symlink_to(tmp_path / "outside.txt")
    with pytest.raises(ToolPermissionError):
        read_regular_file(hostile, real)


def test_an_atomic_write_leaves_no_temporary_file_and_keeps_the_file_mode(hostile):
    target = hostile.workspace / "kept.sh"
    target.write_text("old")
    target.chmod(0o750)
    real = resolve_in_workspace(hostile, "kept.sh", must_exist=True, for_write=True)
    write_atomic(hostile, real, b"new")
    assert target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o750
    assert not [p for p in hostile.workspace.iterdir() if p.name.endswith(".tmp")]


def test_a_workspace_that_itself_lives_below_a_folder_named_env_still_works(tmp_path):
    ws = tmp_path / ".env" / "workspace"
    ws.mkdir(parents=True)
    (ws / "a.txt").write_text("x")
    ctx = CallContext(workspace=ws)
    assert resolve_in_workspace(ctx, "a.txt", must_exist=True, for_write=False) == ws / "a.txt"


@pytest.mark.parametrize("raw", [".git/config", ".git/hooks/pre-commit", "repo/.git/info/attributes"])
def test_writing_inside_a_git_directory_is_refused_but_reading_is_allowed(hostile, raw):
    target = hostile.workspace / raw
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("[core]\n")
    with pytest.raises(ToolPermissionError, match=r"inside \.git"):
        resolve_in_workspace(hostile, raw, must_exist=False, for_write=True)
    assert resolve_in_workspace(hostile, raw, must_exist=True, for_write=False) == target.resolve()
