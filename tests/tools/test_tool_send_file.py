"""send_file: a workspace file handed to the channel as a FileOut event, inside the sandbox."""

from __future__ import annotations

import pytest

from bot.core.events import FileOut
from bot.core.identity import Sender
from bot.core.tool import ToolPermissionError, ToolUnsupportedError
from tests.support.media_support import png
from tools.send_file import build


@pytest.fixture
def sent(ctx):
    events: list = []

    async def sink(event):
        events.append(event)
    ctx.event_sink = sink
    return events


async def test_a_workspace_file_is_handed_to_the_channel(ctx, config, sent):
    (config.workspace / "charts").mkdir()
    (config.workspace / "charts" / "sales.png").write_bytes(png(20, 10))
    result = await build(config).execute(ctx, path="charts/sales.png", caption="Q3")
    (event,) = sent
    assert isinstance(event, FileOut) and event.name == "sales.png" and event.path == "charts/sales.png"
    assert event.data == png(20, 10) and event.media_type == "image/png" and event.caption == "Q3"
    assert result == {"sent": "charts/sales.png", "size_bytes": len(png(20, 10)), "channel": "cli"}


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "link/secret.txt"])
async def test_paths_outside_the_workspace_are_refused(ctx, config, sent, tmp_path, path):
    (tmp_path / "outside.txt").write_text("secret")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret.txt").write_text("secret")
    (config.workspace / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ToolPermissionError):
        await build(config).execute(ctx, path=path)
    assert sent == []


async def test_the_bots_own_files_are_refused(ctx, config, sent):
    (config.workspace / ".env").write_text("TOKEN=x")
    with pytest.raises(ToolPermissionError):
        await build(config).execute(ctx, path=".env")
    assert sent == []


async def test_a_file_over_the_platform_limit_is_a_clear_error_for_the_model(ctx, config, sent):
    (config.workspace / "big.bin").write_bytes(b"x" * (10 * 1024 * 1024 + 1))
    ctx.sender = Sender("discord", "1")
    with pytest.raises(ToolUnsupportedError, match=r"discord accepts files up to 10\.5 MB"):
        await build(config).execute(ctx, path="big.bin")
    assert sent == []


async def test_without_a_conversation_the_tool_says_so(ctx, config):
    (config.workspace / "a.txt").write_text("a")
    with pytest.raises(ToolUnsupportedError, match="no chat"):
        await build(config).execute(ctx, path="a.txt")


async def test_the_preview_sends_nothing(ctx, config, sent):
    (config.workspace / "a.txt").write_text("a")
    preview = await build(config).dry_run(ctx, path="a.txt")
    assert preview == {"summary": "Send a.txt to this chat"} and sent == []


async def test_a_file_whose_name_hides_its_extension_is_sent_under_a_plain_name(ctx, config, sent):
    (config.workspace / "invoice\u202egpj.exe").write_bytes(b"MZ")
    await build(config).execute(ctx, path="invoice\u202egpj.exe")
    (event,) = sent
    assert event.name == "invoice gpj.exe"
