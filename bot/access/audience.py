"""Who reads a conversation, and so whose files and memory a turn in it works on.

In a group (or any conversation other people read) the bot's answer goes to everyone in it, so
whatever a turn reads may end up in front of all of them. With `[agent] workspace_mode =
"per_sender"`, a turn in such a conversation therefore works in the *conversation's* own folder
and memory scope (the same id a shared session's owner has, `telegram:chat:-100…`), never in the
private folder or memory of the member it is for. A member who wants to show the group a file
or a memory of their own uses `share_private`, which asks them every time (bot.core.policy:
`discloses`). In `"shared"` mode everyone already reads the one workspace; memory stays the
member's (`myclaw doctor --security` says what each mode means for groups).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.access.workspaces import workspace_for
from bot.core.identity import Sender


def audience_of(channel: str, chat: str, is_group: bool) -> str:
    """Who else reads a conversation: "" for the sender alone, else a phrase naming it."""
    return f"everyone in the {channel} group chat {chat}" if is_group else ""


def conversation_owner(channel: str, chat: str) -> str:
    """The id a conversation's own folder and memory belong to (a shared session's owner)."""
    return f"{channel}:chat:{chat}"


@dataclass(frozen=True)
class Reach:
    """What one call may work on: the folder of its file and shell tools, and — when they are
    the conversation's — whose memory it reads and writes and the requester's own folder (for
    `share_private` only). None: the requester's own."""

    workspace: Path
    memory_owner: Sender | None = None
    private_workspace: Path | None = None


def reach_for(config: Any, sender: str, channel: str, chat: str, audience: str) -> Reach:
    """The reach of a call made for `sender` in a conversation read by `audience`."""
    own = workspace_for(config, sender)
    shared_mode = config["agent"].get("workspace_mode", "shared") != "per_sender"
    if not audience or shared_mode or own == config.workspace:
        return Reach(own)   # the terminal keeps the root
    owner = conversation_owner(channel, chat)
    return Reach(workspace_for(config, owner), Sender.parse(owner), own)
