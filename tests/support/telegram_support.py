"""What the Telegram tests share: sink timings short enough for tests (edits every 50 ms, the
typing indicator refreshed every 200 ms)."""

from __future__ import annotations

from channels.telegram.sink import SinkSettings

FAST = SinkSettings(edit_interval=0.05, group_edit_interval=0.05, typing_delay=0.05,
                    typing_interval=0.2)
