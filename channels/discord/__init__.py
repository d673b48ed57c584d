"""The Discord channel (discord.py): one module per concern.

    channel    routing messages and slash commands to the agent; start and stop
    gateway    the discord.py client, intents, shards and their locks, login, readiness
    rendering  splitting long replies, neutralising mentions and Markdown in previews
    sink       one turn's events rendered in one channel or interaction
    approvals  approval buttons (persistent DynamicItems) and what a tap does
"""

from channels.discord.channel import DiscordChannel, check_config, create
from channels.discord.gateway import exclusive_locks

__all__ = ["DiscordChannel", "check_config", "create", "exclusive_locks"]
