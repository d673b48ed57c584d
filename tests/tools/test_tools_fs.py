"""fs_read, fs_write, fs_edit and glob_list on a real temporary workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.core.tool import (
    CallContext,
    ToolInvalidArgsError,
    ToolNotFoundError,
    ToolPermissionError,
    ToolUnsupportedError,
    UnrevertibleError,
)
from tests.conftest import make_config
from tests.support.conformance import snapshot_tree
from tools import fs_edit, fs_read, fs_write, glob_list


@pytest.fixture
def ws(ctx: CallContext) -> Path:
    return ctx.workspace


def test_capabilities_name_the_configured_workspace(config):
    assert fs_read.build(config).meta.capability_required == f"fs:read:{config.workspace}/*"
    assert fs_write.build(config).meta.capability_required == f"fs:write:{config.workspace}/*"
    assert fs_edit.build(config).meta.capability_required == f"fs:write:{config.workspace}/*"
    assert glob_list.build().meta.capability_required == "fs:list"


# --- fs_read -----------------------------------------------------------------------------


async def test_fs_read_returns_the_content_and_size_of_a_text_file(ctx, ws, config):
    (ws / "notes").mkdir()
    (ws / "notes" / "a.md").write_text("ciao è\n", encoding="utf-8")
    result = await fs_read.build(config).execute(ctx, path="notes/a.md")
    assert result == {"path": "notes/a.md", "content": "ciao è\n", "size_bytes": 8,
                      "bytes_read": 8, "truncated": False, "encoding": "utf-8"}


async def test_fs_read_truncates_at_max_bytes_without_breaking_a_character(ctx, ws, config):
    (ws / "long.txt").write_text("àààà", encoding="utf-8")  # 8 bytes, 2 per character
    result = await fs_read.build(config).execute(ctx, path="long.txt", max_bytes=5)
    assert result["truncated"] is True
    assert result["content"] == "àà"
    assert result["size_bytes"] == 8


async def test_fs_read_honours_another_encoding(ctx, ws, config):
    (ws / "latin.txt").write_bytes("perché".encode("latin-1"))
    result = await fs_read.build(config).execute(ctx, path="latin.txt", encoding="latin-1")
    assert result["content"] == "perché"


async def test_fs_read_refuses_a_binary_file_with_a_hint(ctx, ws, config):
    (ws / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(ToolUnsupportedError, match="binary") as caught:
        await fs_read.build(config).execute(ctx, path="image.png")
    assert "encoding" in caught.value.llm_hint


async def test_fs_read_refuses_undecodable_bytes_and_suggests_another_encoding(ctx, ws, config):
    (ws / "old.txt").write_bytes(b"caf\xe9")
    with pytest.raises(ToolUnsupportedError, match="not valid utf-8") as caught:
        await fs_read.build(config).execute(ctx, path="old.txt")
    assert "latin-1" in caught.value.llm_hint


async def test_fs_read_of_a_missing_file_suggests_glob_list(ctx, config):
    with pytest.raises(ToolNotFoundError) as caught:
        await fs_read.build(config).execute(ctx, path="nope.md")
    assert "glob_list" in caught.value.llm_hint


async def test_fs_read_of_a_directory_suggests_listing_it(ctx, ws, config):
    (ws / "notes").mkdir()
    with pytest.raises(ToolInvalidArgsError, match="is a directory") as caught:
        await fs_read.build(config).execute(ctx, path="notes")
    assert "glob_list" in caught.value.llm_hint


async def test_fs_read_rejects_an_unknown_or_non_text_encoding(ctx, ws, config):
    (ws / "a.txt").write_text("x")
    with pytest.raises(ToolInvalidArgsError, match="Unknown encoding"):
        await fs_read.build(config).execute(ctx, path="a.txt", encoding="klingon")
    with pytest.raises(ToolInvalidArgsError, match="not a text encoding"):
        await fs_read.build(config).execute(ctx, path="a.txt", encoding="hex")


async def test_fs_read_cannot_reach_outside_the_workspace(ctx, tmp_path, config):
    (tmp_path / "secret.txt").write_text("s")
    with pytest.raises(ToolPermissionError):
        await fs_read.build(config).execute(ctx, path="../secret.txt")


async def test_fs_read_dry_run_is_the_same_read(ctx, ws, config):
    (ws / "a.txt").write_text("same")
    tool = fs_read.build(config)
    assert await tool.dry_run(ctx, path="a.txt") == await tool.execute(ctx, path="a.txt")


# --- fs_write ----------------------------------------------------------------------------


async def test_fs_write_dry_run_describes_a_creation_and_writes_nothing(ctx, ws, config):
    before = snapshot_tree(ws)
    preview = await fs_write.build(config).dry_run(ctx, path="notes/a.md", content="x" * 1229)
    assert preview["summary"] == "Create notes/a.md (1.2 KB)"
    assert preview["creates_file"] is True
    assert snapshot_tree(ws) == before


async def test_fs_write_dry_run_describes_an_overwrite_with_sizes_and_line_counts(ctx, ws, config):
    old = "".join(f"line {i}\n" for i in range(300))  # 2590 bytes, 300 lines
    (ws / "a.md").write_text(old)
    new = "".join(f"line {i}\n" for i in range(260)) + "extra\n" * 12
    preview = await fs_write.build(config).dry_run(ctx, path="a.md", content=new)
    assert preview["summary"] == "Overwrite a.md (2.5 KB → 2.2 KB, +12 −40 lines)"
    assert (ws / "a.md").read_text() == old


async def test_fs_write_creates_parent_folders_and_the_file(ctx, ws, config):
    result = await fs_write.build(config).execute(ctx, path="new/deep/a.md", content="hello\n")
    assert (ws / "new" / "deep" / "a.md").read_text() == "hello\n"
    assert result["created"] is True and result["bytes_written"] == 6
    assert result["undo"]["created_dirs"] == ["new", "new/deep"]


async def test_fs_write_then_revert_removes_the_created_file_and_its_new_folders(ctx, ws, config):
    tool = fs_write.build(config)
    before = snapshot_tree(ws)
    args = {"path": "new/deep/a.md", "content": "hello\n"}
    result = await tool.execute(ctx, **args)
    reverted = await tool.revert(ctx, args, result)
    assert reverted["removed"] is True
    assert snapshot_tree(ws) == before


async def test_fs_write_then_revert_restores_the_previous_content(ctx, ws, config):
    (ws / "a.md").write_text("original\n")
    tool = fs_write.build(config)
    args = {"path": "a.md", "content": "replaced\n"}
    result = await tool.execute(ctx, **args)
    assert (ws / "a.md").read_text() == "replaced\n"
    await tool.revert(ctx, args, result)
    assert (ws / "a.md").read_text() == "original\n"


async def test_fs_write_revert_restores_binary_previous_content_byte_for_byte(ctx, ws, config):
    (ws / "blob").write_bytes(b"\x00\xff\xfe")
    tool = fs_write.build(config)
    result = await tool.execute(ctx, path="blob", content="text")
    await tool.revert(ctx, {}, result)
    assert (ws / "blob").read_bytes() == b"\x00\xff\xfe"


async def test_fs_write_revert_of_a_file_deleted_since_says_it_was_deleted(ctx, ws, config):
    tool = fs_write.build(config)
    for previous in (None, "original\n"):      # created by the write, or overwritten by it
        if previous is not None:
            (ws / "a.md").write_text(previous)
        result = await tool.execute(ctx, path="a.md", content="mine\n")
        (ws / "a.md").unlink()                  # a shell `rm` afterwards
        with pytest.raises(UnrevertibleError, match=r"a\.md was deleted after it was written"):
            await tool.revert(ctx, {}, result)
        assert not (ws / "a.md").exists()


async def test_fs_write_refuses_to_revert_a_file_changed_since(ctx, ws, config):
    tool = fs_write.build(config)
    result = await tool.execute(ctx, path="a.md", content="mine\n")
    (ws / "a.md").write_text("the user's later edit\n")
    with pytest.raises(UnrevertibleError, match="changed after it was written"):
        await tool.revert(ctx, {}, result)
    assert (ws / "a.md").read_text() == "the user's later edit\n"


async def test_fs_write_refuses_the_bots_own_files_and_outside_paths(ctx, ws, config):
    tool = fs_write.build(config)
    for path in (".env", "../escape.txt", str(config.store_path)):
        with pytest.raises(ToolPermissionError):
            await tool.execute(ctx, path=path, content="x")
    assert not (ws / ".env").exists()
    assert not (ws.parent / "escape.txt").exists()


async def test_overwriting_a_huge_file_shows_the_new_content_whole_and_cannot_be_undone(ctx, ws, config):
    (ws / "big.log").write_bytes(b"x\n" * (fs_write.MAX_UNDO_BYTES // 2 + 10))
    tool = fs_write.build(config)
    preview = await tool.dry_run(ctx, path="big.log", content="small")
    assert preview["summary"] == "Overwrite big.log (1.9 MB → 5 B; too large to compare, cannot be undone)"
    assert "+small\n" in preview["diff"] and "not compared" in preview["diff"]
    result = await tool.execute(ctx, path="big.log", content="small")
    with pytest.raises(UnrevertibleError, match="too large"):
        await tool.revert(ctx, {}, result)
    assert (ws / "big.log").read_text() == "small"


async def test_fs_edit_refuses_a_file_too_large_to_keep_for_undo(ctx, ws, config):
    (ws / "big.txt").write_text("needle\n" + "y" * fs_write.MAX_UNDO_BYTES)
    with pytest.raises(ToolUnsupportedError, match="too large"):
        await fs_edit.build(config).execute(ctx, path="big.txt", old_text="needle", new_text="pin")


async def test_fs_write_refuses_to_revert_a_file_that_grew_since(ctx, ws, config):
    tool = fs_write.build(config)
    result = await tool.execute(ctx, path="log.txt", content="first line\n")
    with (ws / "log.txt").open("a") as handle:
        handle.write("appended by someone else\n")
    with pytest.raises(UnrevertibleError):
        await tool.revert(ctx, {}, result)
    assert (ws / "log.txt").read_text() == "first line\nappended by someone else\n"


async def test_fs_write_onto_a_directory_is_a_clear_error(ctx, ws, config):
    (ws / "notes").mkdir()
    with pytest.raises(ToolInvalidArgsError, match="is a directory"):
        await fs_write.build(config).execute(ctx, path="notes", content="x")


# --- fs_edit -----------------------------------------------------------------------------


async def test_fs_edit_dry_run_returns_a_unified_diff_and_changes_nothing(ctx, ws, config):
    (ws / "a.md").write_text("one\ntwo\nthree\n")
    preview = await fs_edit.build(config).dry_run(ctx, path="a.md", old_text="two",
                                                  new_text="2\n2b")
    assert preview["summary"] == "Edit a.md (+2 −1 lines)"
    assert "--- a/a.md\n+++ b/a.md\n" in preview["diff"]
    assert "-two\n+2\n+2b\n" in preview["diff"]
    assert (ws / "a.md").read_text() == "one\ntwo\nthree\n"


async def test_fs_edit_replaces_the_single_match(ctx, ws, config):
    (ws / "a.md").write_text("alpha beta gamma\n")
    result = await fs_edit.build(config).execute(ctx, path="a.md", old_text="beta",
                                                 new_text="BETA")
    assert (ws / "a.md").read_text() == "alpha BETA gamma\n"
    assert result["replacements"] == 1


async def test_fs_edit_then_revert_restores_the_file(ctx, ws, config):
    (ws / "a.md").write_text("alpha beta\n")
    tool = fs_edit.build(config)
    args = {"path": "a.md", "old_text": "beta", "new_text": "delta"}
    result = await tool.execute(ctx, **args)
    await tool.revert(ctx, args, result)
    assert (ws / "a.md").read_text() == "alpha beta\n"


async def test_fs_edit_with_no_match_says_zero_and_suggests_copying_from_fs_read(ctx, ws, config):
    (ws / "a.md").write_text("alpha\n")
    with pytest.raises(ToolNotFoundError, match="found 0 times") as caught:
        await fs_edit.build(config).execute(ctx, path="a.md", old_text="omega", new_text="x")
    assert "fs_read" in caught.value.llm_hint
    assert caught.value.details["matches"] == 0


async def test_fs_edit_with_several_matches_gives_the_count_and_asks_for_context(ctx, ws, config):
    (ws / "a.md").write_text("x = 1\nx = 1\nx = 1\n")
    with pytest.raises(ToolInvalidArgsError, match="found 3 times") as caught:
        await fs_edit.build(config).execute(ctx, path="a.md", old_text="x = 1", new_text="x = 2")
    assert "surrounding context" in caught.value.llm_hint
    assert (ws / "a.md").read_text() == "x = 1\nx = 1\nx = 1\n"


async def test_fs_edit_counts_overlapping_matches_as_ambiguous(ctx, ws, config):
    (ws / "a.md").write_text("aaa")
    with pytest.raises(ToolInvalidArgsError, match="found 2 times"):
        await fs_edit.build(config).execute(ctx, path="a.md", old_text="aa", new_text="b")


async def test_fs_edit_points_out_windows_line_endings_when_nothing_matches(ctx, ws, config):
    (ws / "a.md").write_bytes(b"one\r\ntwo\r\n")
    with pytest.raises(ToolNotFoundError) as caught:
        await fs_edit.build(config).execute(ctx, path="a.md", old_text="one\ntwo", new_text="x")
    assert "CRLF" in caught.value.llm_hint


async def test_fs_edit_refuses_an_identical_replacement_and_a_missing_file(ctx, ws, config):
    (ws / "a.md").write_text("same")
    tool = fs_edit.build(config)
    with pytest.raises(ToolInvalidArgsError, match="identical"):
        await tool.execute(ctx, path="a.md", old_text="same", new_text="same")
    with pytest.raises(ToolNotFoundError):
        await tool.execute(ctx, path="missing.md", old_text="a", new_text="b")


async def test_fs_edit_refuses_to_revert_when_the_file_changed_since(ctx, ws, config):
    (ws / "a.md").write_text("alpha beta\n")
    tool = fs_edit.build(config)
    result = await tool.execute(ctx, path="a.md", old_text="beta", new_text="delta")
    (ws / "a.md").write_text("rewritten by the user\n")
    with pytest.raises(UnrevertibleError):
        await tool.revert(ctx, {}, result)
    assert (ws / "a.md").read_text() == "rewritten by the user\n"


# --- glob_list ---------------------------------------------------------------------------


@pytest.fixture
def tree(ws: Path, tmp_path: Path) -> Path:
    for rel in ("README.md", "notes/a.md", "notes/b.txt", "notes/deep/c.md", "src/main.py",
                ".env", "notes/.env.local"):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(rel)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "leak.md").write_text("outside")
    (ws / "outlink").symlink_to(tmp_path / "elsewhere")
    (ws / "inlink.md").symlink_to(ws / "notes" / "a.md")
    (ws / "cfg" / ".env").mkdir(parents=True)
    (ws / "cfg" / ".env" / "token.md").write_text("secret")
    (ws / "alias.md").symlink_to(ws / "cfg" / ".env" / "token.md")
    os.mkfifo(ws / "notes" / "pipe.md")
    return ws


@pytest.mark.parametrize(("pattern", "expected"), [
    ("*.md", ["README.md", "inlink.md"]),
    ("notes/*", ["notes/a.md", "notes/b.txt", "notes/deep/"]),
    ("**/*.md", ["README.md", "inlink.md", "notes/a.md", "notes/deep/c.md"]),
    ("notes/**/*.md", ["notes/a.md", "notes/deep/c.md"]),
    ("notes/?.*", ["notes/a.md", "notes/b.txt"]),
    ("notes/[!a]*", ["notes/b.txt", "notes/deep/"]),
    ("src/**", ["src/main.py"]),
    ("./notes/deep/*", ["notes/deep/c.md"]),
    ("README.md", ["README.md"]),
    ("notes/deep/c.md", ["notes/deep/c.md"]),
    ("notes/deep", ["notes/deep/"]),
])
async def test_glob_list_matches_sorted_paths_inside_the_workspace(ctx, tree, pattern, expected):
    result = await glob_list.build().execute(ctx, pattern=pattern)
    assert result["matches"] == expected
    assert result["truncated"] is False


async def test_glob_list_never_lists_env_files_fifos_or_what_a_symlink_leads_to_outside(ctx, tree):
    result = await glob_list.build().execute(ctx, pattern="**/*")
    listed = set(result["matches"])
    assert not {".env", "notes/.env.local", "alias.md", "notes/pipe.md", "outlink/", "outlink"} & listed
    assert not [p for p in listed if "leak" in p or "token" in p]
    assert "notes/deep/c.md" in listed


async def test_glob_list_caps_the_results_and_says_so(ctx, tree):
    result = await glob_list.build().execute(ctx, pattern="**/*", max_results=2)
    assert result["matches"] == ["README.md", "cfg/"]
    assert result["truncated"] is True
    assert result["total_matches"] > 2


@pytest.mark.parametrize("pattern", ["../*", "notes/../../*", "/etc/*", "~/*", "a\x00*"])
async def test_glob_list_refuses_patterns_that_leave_the_workspace(ctx, pattern):
    with pytest.raises(ToolPermissionError) as caught:
        await glob_list.build().execute(ctx, pattern=pattern)
    assert str(ctx.workspace) in caught.value.llm_hint


async def test_glob_list_does_not_list_the_store_when_it_lives_in_the_workspace(tmp_path):
    ws = tmp_path / "workspace"
    config = make_config(tmp_path, {"store": {"path": str(ws / "data" / "myclaw.db")}})
    (ws / "data").mkdir()
    (ws / "data" / "myclaw.db").write_text("db")
    (ws / "keep.md").write_text("k")
    ctx = CallContext(workspace=ws, settings=config)
    result = await glob_list.build().execute(ctx, pattern="**/*")
    assert result["matches"] == ["keep.md"]
    with pytest.raises(ToolPermissionError):
        await glob_list.build().execute(ctx, pattern="data/*")


async def test_glob_list_with_no_match_explains_how_to_search_deeper(ctx, tree):
    result = await glob_list.build().execute(ctx, pattern="*.py")
    assert result["matches"] == [] and result["count"] == 0
    assert "**/" in result["note"]


async def test_glob_list_rejects_a_malformed_character_set(ctx):
    with pytest.raises(ToolInvalidArgsError, match="not a valid glob"):
        await glob_list.build().execute(ctx, pattern="[z-a]*")


async def test_glob_list_does_not_walk_through_a_symlinked_folder(ctx, tree):
    (tree / "notes_alias").symlink_to(tree / "notes")
    assert (await glob_list.build().execute(ctx, pattern="notes_alias/*"))["matches"] == []
    with pytest.raises(ToolPermissionError):
        await glob_list.build().execute(ctx, pattern="outlink/*")
