"""The Telegram channel (python-telegram-bot): one module per concern.

    channel    routing updates to the agent; start and stop
    reading    which messages are for the bot, read as the agent's IncomingMessage
    ordering   per-chat ordered, cross-chat concurrent update processing
    webhook    the webhook endpoint (polling uses PTB's updater)
    http       the Bot API transport over aiohttp
    rendering  model Markdown to Telegram HTML, splitting long replies
    sending    sending and editing with plain-text fallback and rate-limit handling
    live       a message edited in place (streamed text, tool status)
    sink       one turn's events rendered in one chat
    approvals  how an approval request and its outcome look; callback data
    taps       a tap on an approval button
"""

from channels.telegram.channel import (
    TelegramChannel,
    check_config,
    check_token,
    create,
    exclusive_locks,
)

__all__ = ["TelegramChannel", "check_config", "check_token", "create", "exclusive_locks"]
