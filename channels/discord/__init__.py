"""The Discord channel (discord.py): one module per concern.

    channel    the client, routing messages and slash commands to the agent
    rendering  splitting long replies, neutralising mentions and Markdown in previews
    sink       one turn's events rendered in one channel or interaction
    approvals  approval buttons (persistent DynamicItems) and what a tap does
"""

from channels.discord.channel import DiscordChannel, create, exclusive_locks

__all__ = ["DiscordChannel", "create", "exclusive_locks"]
