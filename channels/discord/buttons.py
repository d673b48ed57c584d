"""Command buttons under a notice (/jobs Cancel, Resume) on Discord.

A `CommandButton` is a persistent `DynamicItem` whose custom_id carries the command
("myclaw:cmd:/jobs cancel 3f2a"); a tap runs that command as a message from whoever tapped, in
that channel, so it passes every check typing it would — a forged custom_id can do nothing its
sender could not type. The answer is an ephemeral followup to the tapper.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import discord

from bot.core.events import Button
from bot.language.translator import Translator

PREFIX = "myclaw:cmd:"
MAX_CUSTOM_ID = 100
TEMPLATE = re.compile(r"myclaw:cmd:(?P<command>/[^\n]{1,88})")


class CommandButton(discord.ui.DynamicItem[discord.ui.Button], template=TEMPLATE):
    def __init__(self, command: str, label: str = "Run"):
        button: discord.ui.Button = discord.ui.Button(
            label=label[:80], style=discord.ButtonStyle.secondary, custom_id=PREFIX + command)
        super().__init__(button)
        self.command = command

    @classmethod
    async def from_custom_id(cls, interaction: discord.Interaction, item: discord.ui.Item[Any],
                             match: re.Match[str], /) -> CommandButton:
        return cls(match["command"])

    async def callback(self, interaction: discord.Interaction) -> None:
        # set by channels.discord.gateway.MyclawClient
        await interaction.client.myclaw.on_command_tap(interaction, self.command)


def view_for(buttons: Sequence[Button], tr: Translator) -> discord.ui.View | None:
    """The buttons that fit a custom_id, or None when there are none; labels in the reader's
    language (at most 80 characters), the command the same in every one."""
    fitting = [b for b in buttons if len(PREFIX + b.command) <= MAX_CUSTOM_ID
               and TEMPLATE.fullmatch(PREFIX + b.command)]
    if not fitting:
        return None
    view = discord.ui.View(timeout=None)
    for button in fitting[:25]:   # Discord allows 25 components per message
        view.add_item(CommandButton(button.command, tr.say(button.label)))
    return view
