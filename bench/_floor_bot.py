"""The floor for bench/telegram.py: the least a Telegram bot on Claude can do per message.

Bare python-telegram-bot + anthropic: long polling, one MessageHandler that makes one
non-streaming `messages.create` call and answers with `reply_text`; updates are processed
concurrently (`concurrent_updates(True)`) so that many chats at once are handled fairly. No
store, no history, no policy, no formatting, no typing indicator.

    TELEGRAM_BOT_TOKEN=... TELEGRAM_BASE_URL=http://127.0.0.1:PORT/bot \\
    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=... python bench/_floor_bot.py

Runs until SIGTERM/SIGINT (PTB's run_polling handles both).
"""

from __future__ import annotations

import os
import sys

# This file sits next to bench/telegram.py, which would shadow python-telegram-bot when the
# script is run by path: drop this directory from the import path first.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _HERE]

from anthropic import AsyncAnthropic  # noqa: E402
from telegram import Update  # noqa: E402
from telegram.ext import ApplicationBuilder, ContextTypes, MessageHandler, filters  # noqa: E402

MODEL = "claude-sonnet-5-5"


def main() -> None:
    client = AsyncAnthropic(api_key=os.environ["ANTHROPIC_API_KEY"],
                            base_url=os.environ["ANTHROPIC_BASE_URL"])

    async def answer(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.message is not None
        response = await client.messages.create(
            model=MODEL, max_tokens=1024,
            messages=[{"role": "user", "content": update.message.text or ""}])
        text = "".join(block.text for block in response.content if block.type == "text")
        await update.message.reply_text(text or "(no answer)")

    app = (ApplicationBuilder().token(os.environ["TELEGRAM_BOT_TOKEN"])
           .base_url(os.environ["TELEGRAM_BASE_URL"]).concurrent_updates(True).build())
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, answer))
    app.run_polling(allowed_updates=["message"])


if __name__ == "__main__":
    main()
