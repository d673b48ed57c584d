"""The sandbox's "no writes inside .git" rule holds on case-insensitive file systems too."""

from __future__ import annotations

import pytest

from bot.core.tool import ToolPermissionError
from tools import fs_write


@pytest.mark.parametrize("path", [".GIT/config", "sub/.Git/hooks/pre-commit"])
async def test_a_differently_cased_git_dir_is_not_writable(ctx, config, path):
    # On macOS (APFS/HFS+, case-insensitive by default) these are the repository's own files,
    # whose config and hooks run programs on the next "read-only" git command.
    with pytest.raises(ToolPermissionError, match=r"inside \.git"):
        await fs_write.build(config).execute(ctx, path=path, content="[core]\n\tfsmonitor = evil\n")
    assert not (ctx.workspace / path).exists()
