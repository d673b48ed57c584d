"""The file tools read a secret file only in a call a person approved naming it, and write none.

fs_read, send_file and glob_list rate a call naming a secret high, preview it without its
content, give it an approval scope no "Always" can reuse, and refuse it (by any name: a
symlink, a hard link, a folder on the way) when no person approved the call.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.approvals.grants import scope_of
from bot.core.events import FileOut
from bot.core.tool import CallContext, ToolPermissionError
from tests.conftest import make_config
from tools import fs_edit, fs_read, fs_write, glob_list, send_file

VALUE = "sk-live-Q7x9Zr2Lm4Pw8Kd1"


def context(config, approved_by: str | None = None, sink=None) -> CallContext:
    return CallContext(workspace=config.workspace, settings=config, approved_by=approved_by,
                       event_sink=sink)


@pytest.fixture
def config(tmp_path: Path):
    config = make_config(tmp_path)
    ws = config.workspace
    (ws / ".env").write_text(f"API_KEY={VALUE}\n")
    (ws / "notes").mkdir()
    (ws / "notes" / "a.md").write_text("hello\n")
    os.link(ws / ".env", ws / "notes" / "hard.txt")
    (ws / "notes" / "soft.txt").symlink_to("../.env")
    (ws / "secrets.d").mkdir()
    (ws / "secrets.d" / "db.txt").write_text("pw\n")
    (ws / "id_ed25519").write_text("PRIVATE\n")
    return config


@pytest.mark.parametrize("path", [".env", "sub/.env.local", "keys/server.pem", "tls.key",
                                  "id_rsa", ".netrc", ".git-credentials", "credentials.json",
                                  "secrets.yaml", "secrets.d/db.txt", "A/.ENV"])
def test_naming_a_secret_file_is_high_risk_and_never_covered_by_an_always(config, path):
    for tool in (fs_read.build(config), send_file.build(config)):
        assert tool.risk_for({"path": path}) == "high"
        assert scope_of(tool, {"path": path}).key.startswith("exact:")


# Other names of a secret file: a symlink to it, a hard link, a path through a linked folder.
LINKS = ["notes/soft.txt", "notes/hard.txt", "data/db.txt", "alias/notes/hard.txt",
         "alias/notes/soft.txt", "./notes/../notes/soft.txt"]


@pytest.fixture
def linked(config):
    ws = config.workspace
    (ws / "data").symlink_to("secrets.d")
    (ws / "alias").symlink_to(".")
    return config


@pytest.mark.parametrize("path", LINKS)
def test_a_link_to_a_secret_file_is_asked_naming_it_like_the_file_itself(linked, path):
    for tool in (fs_read.build(linked), send_file.build(linked)):
        assert tool.risk_for({"path": path}) == "high", (tool.meta.name, path)
        assert scope_of(tool, {"path": path}).key.startswith("exact:")


@pytest.mark.parametrize("path", LINKS)
async def test_in_a_members_own_folder_a_link_to_their_secret_file_is_asked_too(linked, path):
    """The dispatcher says where the call runs (a per-sender folder, not the tool's root)."""
    from bot.core.tool import risk_of

    member = linked.workspace / "telegram_7"
    member.mkdir()
    for name in ("notes", "secrets.d", ".env", "data", "alias"):
        os.rename(linked.workspace / name, member / name)
    tool = fs_read.build(linked)
    assert risk_of(tool, {"path": path}, member) == "high"
    assert scope_of(tool, {"path": path}, member).key.startswith("exact:")
    assert risk_of(tool, {"path": "notes/a.md"}, member) == "low"


async def test_the_preview_of_a_link_to_a_secret_file_names_the_secret_not_its_content(linked):
    preview = await fs_read.build(linked).dry_run(context(linked), path="notes/soft.txt")
    assert ".env" in preview["summary"] and VALUE not in str(preview)
    result = await fs_read.build(linked).execute(context(linked, "cli:local"), path="notes/soft.txt")
    assert VALUE in result["content"]   # approved: read, and redacted by the dispatcher


def test_an_always_for_ordinary_files_covers_no_secret_file(config):
    tool = fs_read.build(config)
    ordinary, secret = scope_of(tool, {"path": "notes/a.md"}), scope_of(tool, {"path": ".env"})
    assert tool.risk_for({"path": "notes/a.md"}) == "low"
    assert ordinary.key == "files" and secret.key != ordinary.key


@pytest.mark.parametrize("path", [".env", "notes/soft.txt", "notes/hard.txt", "secrets.d/db.txt",
                                  "id_ed25519"])
async def test_fs_read_refuses_a_secret_by_any_name_when_no_person_approved(config, path):
    with pytest.raises(ToolPermissionError, match="secret file"):
        await fs_read.build(config).execute(context(config), path=path)


async def test_fs_read_approved_by_a_person_reads_it_and_its_preview_does_not(config):
    tool = fs_read.build(config)
    preview = await tool.dry_run(context(config), path=".env")
    assert ".env" in preview["summary"] and VALUE not in str(preview)
    result = await tool.execute(context(config, "cli:local"), path=".env")
    assert VALUE in result["content"]   # the dispatcher redacts it on the way out


async def test_a_secret_file_is_never_written_even_when_approved(config):
    approved = context(config, "cli:local")
    with pytest.raises(ToolPermissionError, match="tools never write it"):
        await fs_write.build(config).execute(approved, path=".env", content="X=1")
    with pytest.raises(ToolPermissionError, match="tools never write it"):
        await fs_edit.build(config).execute(approved, path="notes/hard.txt",
                                            old_text="API_KEY", new_text="KEY")
    assert (config.workspace / ".env").read_text() == f"API_KEY={VALUE}\n"


async def test_glob_list_leaves_secret_files_out_and_says_how_many(config):
    result = await glob_list.build().execute(context(config), pattern="**/*")
    assert ".env" not in result["matches"] and "id_ed25519" not in result["matches"]
    assert not any(m.startswith("secrets.d") for m in result["matches"])
    assert "notes/soft.txt" not in result["matches"]
    assert result["secret_files_not_listed"] >= 3 and "include_secret_files" in result["note"]


async def test_glob_list_lists_secret_names_only_when_a_person_approved_asking_for_them(config):
    tool = glob_list.build()
    args = {"pattern": "**/*", "include_secret_files": True}
    assert tool.risk_for(args) == "high" and scope_of(tool, args).key.startswith("exact:")
    assert tool.risk_for({"pattern": "**/*"}) == "low"
    unapproved = await tool.execute(context(config), **args)
    assert ".env" not in unapproved["matches"]
    approved = await tool.execute(context(config, "cli:local"), **args)
    assert {".env", "id_ed25519", "secrets.d/db.txt"} <= set(approved["matches"])
    preview = await tool.dry_run(context(config), **args)
    assert "secret files" in preview["summary"]


async def test_send_file_sends_a_secret_only_when_a_person_approved(config):
    sent: list[FileOut] = []

    async def sink(event):
        sent.append(event)

    tool = send_file.build(config)
    with pytest.raises(ToolPermissionError, match="secret file"):
        await tool.execute(context(config, sink=sink), path="notes/hard.txt")
    preview = await tool.dry_run(context(config), path="notes/soft.txt")
    assert "secret file" in preview["summary"]
    await tool.execute(context(config, "cli:local", sink), path=".env")
    assert [f.path for f in sent] == [".env"]


async def test_the_configured_globs_decide_what_a_secret_file_is(tmp_path):
    config = make_config(tmp_path, {"security": {"secret_files": ["*.vault"]}})
    (config.workspace / "prod.vault").write_text("x\n")
    (config.workspace / ".env").write_text("y\n")
    tool = fs_read.build(config)
    assert tool.risk_for({"path": "prod.vault"}) == "high"
    assert tool.risk_for({"path": ".env"}) == "low"
    with pytest.raises(ToolPermissionError, match="secret file"):
        await tool.execute(context(config), path="prod.vault")
    assert (await tool.execute(context(config), path=".env"))["content"] == "y\n"
