"""[agent] workspace_mode: "shared" keeps one workspace for everyone (as before); "per_sender"
gives each sender a folder of their own, and the file and shell tools cannot leave it. The
terminal keeps the root."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from bot.access.workspaces import folder_name, workspace_for
from bot.core.errors import ConfigError
from bot.core.events import CollectingSink, IncomingMessage
from tests.conftest import make_config
from tests.fakes.anthropic_server import text, tool_use

OWNER_SECRET = "owner-only-notes-4411"
FRIEND = "telegram:777"


# --- folder names --------------------------------------------------------------------------------


TRICKY_SENDERS = [
    "telegram:42", "telegram_42", "telegram:-42", "telegram-3a42", "telegram:4-2", "discord:42",
    "../etc", "..", ".", "a/b", "a\\b", "/", "~root", ".hidden", "Telegram:42", "telegram:42 ",
    "telegram:42\x00", "console:ädmin", "console:admin", "x" * 500, "x" * 501, "-rf", "",
]


def test_folder_names_are_safe_and_never_shared():
    senders = [s for s in TRICKY_SENDERS if s]
    names = [folder_name(s) for s in senders]
    assert len(set(names)) == len(senders)  # injective: no two senders share a folder
    for name in names:
        assert re.fullmatch(r"[a-z0-9_-]{1,120}", name), name
    assert folder_name("telegram:42") == "telegram_42"
    assert folder_name("discord:1234567890") == "discord_1234567890"
    with pytest.raises(ValueError):
        folder_name("")


def test_shared_mode_gives_every_sender_the_root(tmp_path):
    config = make_config(tmp_path)
    assert config["agent"]["workspace_mode"] == "shared"
    for sender in ("cli:local", FRIEND, "discord:1"):
        assert workspace_for(config, sender) == config.workspace
    assert os.listdir(config.workspace) == []  # nothing created


def test_per_sender_mode_creates_a_private_folder_on_first_use_and_keeps_the_root_for_the_cli(
        tmp_path):
    config = make_config(tmp_path, {"agent": {"workspace_mode": "per_sender"}})
    assert workspace_for(config, "cli:local") == config.workspace
    folder = workspace_for(config, FRIEND)
    assert folder == config.workspace / "telegram_777" and folder.is_dir()
    assert folder.stat().st_mode & 0o777 == 0o700
    assert workspace_for(config, FRIEND) == folder  # the same folder next time


def test_a_planted_symlink_is_refused_not_followed(tmp_path):
    config = make_config(tmp_path, {"agent": {"workspace_mode": "per_sender"}})
    (config.workspace / "telegram_777").symlink_to("/etc")
    with pytest.raises(ConfigError, match="not a directory"):
        workspace_for(config, FRIEND)


def test_an_unknown_mode_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError):
        make_config(tmp_path, {"agent": {"workspace_mode": "per_chat"}})


# --- through the running agent -------------------------------------------------------------------


def last_tool_result(fake_anthropic) -> str:
    block = fake_anthropic.last_request.json["messages"][-1]["content"][0]
    assert block["type"] == "tool_result"
    content = block["content"]
    return content if isinstance(content, str) else json.dumps(content)


async def run_tool_as(app, fake_anthropic, sender: str, tool: str, args: dict) -> str:
    fake_anthropic.script(tool_use(tool, args), text("done"))
    channel = sender.partition(":")[0]
    await app.agent.handle(IncomingMessage(sender, "chat-1", "go", channel=channel),
                           CollectingSink())
    return last_tool_result(fake_anthropic)


def owner_file(app) -> Path:
    path = app.config.workspace / "notes.txt"
    path.write_text(OWNER_SECRET)
    return path


FRIEND_READS = ["notes.txt", "../notes.txt", "{root}/notes.txt", "{root}/../workspace/notes.txt",
                "up/notes.txt"]  # a symlink in the friend's folder pointing at the root


@pytest.mark.parametrize("path", FRIEND_READS)
async def test_a_read_only_friend_cannot_read_the_owners_file_per_sender(app_factory,
                                                                          fake_anthropic, path):
    app = await app_factory({"agent": {"workspace_mode": "per_sender"},
                             "senders": {FRIEND: "read_only"}})
    root = owner_file(app).parent
    (root / "telegram_777").mkdir()
    (root / "telegram_777" / "up").symlink_to(root)
    result = await run_tool_as(app, fake_anthropic, FRIEND, "fs_read",
                               {"path": path.format(root=root)})
    assert OWNER_SECRET not in result
    assert "does not exist" in result or "inside the workspace" in result


async def test_a_friends_own_files_are_readable_and_live_in_their_folder(app_factory,
                                                                          fake_anthropic):
    app = await app_factory({"agent": {"workspace_mode": "per_sender"},
                             "senders": {FRIEND: "read_only"}})
    (app.config.workspace / "telegram_777").mkdir()
    (app.config.workspace / "telegram_777" / "mine.txt").write_text("friend's own text")
    result = await run_tool_as(app, fake_anthropic, FRIEND, "fs_read", {"path": "mine.txt"})
    assert "friend's own text" in result


async def test_shared_mode_is_unchanged_the_friend_reads_the_root(app_factory, fake_anthropic):
    app = await app_factory({"senders": {FRIEND: "read_only"}})
    owner_file(app)
    result = await run_tool_as(app, fake_anthropic, FRIEND, "fs_read", {"path": "notes.txt"})
    assert OWNER_SECRET in result


async def test_one_senders_shell_cannot_see_another_senders_folder(app_factory, fake_anthropic):
    other = "telegram:888"
    app = await app_factory({"agent": {"workspace_mode": "per_sender"},
                             "senders": {FRIEND: "full", other: "full"},
                             "profiles": {"default": {"auto_approve": ["shell_run"]}}})
    owner_file(app)
    written = await run_tool_as(app, fake_anthropic, other, "shell_run",
                                {"command": "echo theirs-9931 > mine.txt && pwd"})
    assert "telegram_888" in written
    assert (app.config.workspace / "telegram_888" / "mine.txt").read_text() == "theirs-9931\n"
    root = app.config.workspace
    probe = (f"pwd; ls -a ..; cat ../telegram_888/mine.txt {root}/telegram_888/mine.txt "
             f"{root}/notes.txt; ls {root}")
    seen = await run_tool_as(app, fake_anthropic, FRIEND, "shell_run", {"command": probe})
    assert str(root / "telegram_777") in seen
    assert "theirs-9931" not in seen and OWNER_SECRET not in seen
    assert "telegram_888" not in seen.replace("telegram_888/mine.txt", "")


async def test_the_terminal_keeps_the_whole_workspace(app_factory, fake_anthropic):
    app = await app_factory({"agent": {"workspace_mode": "per_sender"}})
    owner_file(app)
    result = await run_tool_as(app, fake_anthropic, "cli:local", "fs_read", {"path": "notes.txt"})
    assert OWNER_SECRET in result
