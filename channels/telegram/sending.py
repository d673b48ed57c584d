"""Sending and editing Telegram messages so that a reply is never dropped.

Every message goes out as HTML first; if Telegram refuses the formatting (400 "can't parse
entities", or any other refusal of the formatted text) the same part is resent as plain text.
Flood control (429 with retry_after) is honoured by waiting as long as Telegram asks, and a
transient network failure is retried a couple of times. What still fails becomes a
`DeliveryError`, which the sink logs (with its traceback) instead of breaking the agent's turn.
"""

from __future__ import annotations

import asyncio
import datetime as dtm
import logging
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from telegram import Bot, InlineKeyboardMarkup, InputFile, Message, ReplyParameters
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from channels.telegram.rendering import Part, split_message

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_FLOOD_WAIT_SECONDS = 120.0
MAX_PHOTO_BYTES = 10_000_000     # sendPhoto's limit; larger images go as documents (50 MB)
CAPTION_LIMIT = 1024
UPLOAD_TIMEOUT = 120.0
NETWORK_ATTEMPTS = 3
NETWORK_BACKOFF_SECONDS = 0.5


class DeliveryError(Exception):
    """A message could not be delivered even after the fallbacks."""


def retry_seconds(exc: RetryAfter) -> float:
    """How long Telegram asked us to wait (PTB is migrating the attribute to timedelta)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)


def _not_modified(exc: BadRequest) -> bool:
    return "not modified" in exc.message.lower()


class Messenger:
    """Thin layer over `telegram.Bot` with the delivery rules every reply needs."""

    def __init__(self, bot: Bot, *, max_flood_wait: float = MAX_FLOOD_WAIT_SECONDS):
        self.bot = bot
        self.max_flood_wait = max_flood_wait

    async def _retrying(self, call: Callable[[], Awaitable[T]], *, wait_on_flood: bool = True) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await call()
            except RetryAfter as exc:
                seconds = retry_seconds(exc)
                if not wait_on_flood or seconds > self.max_flood_wait or attempt > NETWORK_ATTEMPTS:
                    raise
                log.info("telegram flood control: waiting %.0f s as asked", seconds)
                await asyncio.sleep(seconds)  # Telegram's own rule: wait exactly this long
            except BadRequest:
                raise   # a refusal, not a transient failure (BadRequest is a NetworkError in PTB)
            except NetworkError:
                if attempt >= NETWORK_ATTEMPTS:
                    raise
                await asyncio.sleep(NETWORK_BACKOFF_SECONDS * attempt)

    async def _html_or_plain(self, name: str, html_call: Callable[[], Awaitable[T]],
                             plain_call: Callable[[], Awaitable[T]], *,
                             wait_on_flood: bool = True) -> T:
        """HTML first, plain text if refused; errors other than "not modified" and (when not
        waiting) flood control become DeliveryError."""
        try:
            try:
                return await self._retrying(html_call, wait_on_flood=wait_on_flood)
            except BadRequest as exc:
                if _not_modified(exc):
                    raise
                log.info("telegram refused the formatted %s (%s); resending as plain text",
                         name, exc.message)
            return await self._retrying(plain_call, wait_on_flood=wait_on_flood)
        except BadRequest as exc:
            if _not_modified(exc):
                raise
            raise DeliveryError(f"telegram {name} failed: {exc.message}") from exc
        except RetryAfter as exc:
            if not wait_on_flood:
                raise
            raise DeliveryError(f"telegram {name} failed: flood control asked for "
                                f"{retry_seconds(exc):.0f} s") from exc
        except TelegramError as exc:
            raise DeliveryError(f"telegram {name} failed: {exc.message}") from exc

    async def send(self, chat_id: int, part: Part, *, reply_to: int | None = None,
                   markup: InlineKeyboardMarkup | None = None, thread_id: int | None = None) -> Message:
        reply = ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to else None
        common: dict[str, Any] = {"chat_id": chat_id, "reply_parameters": reply, "reply_markup": markup,
                                  "message_thread_id": thread_id}
        return await self._html_or_plain(
            "message",
            lambda: self.bot.send_message(text=part.html, parse_mode=ParseMode.HTML, **common),
            lambda: self.bot.send_message(text=part.plain, **common))

    async def send_markdown(self, chat_id: int, markdown: str, *, reply_to: int | None = None,
                            thread_id: int | None = None,
                            markup: InlineKeyboardMarkup | None = None) -> list[Message]:
        """Send a model answer: converted, split into ≤4096-unit parts, each with its fallback.
        `markup` (buttons) goes under the last part."""
        sent = []
        parts = split_message(markdown)
        for index, part in enumerate(parts):
            sent.append(await self.send(chat_id, part, reply_to=reply_to if index == 0 else None,
                                        thread_id=thread_id,
                                        markup=markup if index == len(parts) - 1 else None))
        return sent

    async def edit(self, chat_id: int, message_id: int, part: Part, *,
                   markup: InlineKeyboardMarkup | None = None, wait_on_flood: bool = True) -> bool:
        """Edit a message in place. An edit that changes nothing counts as done."""
        common: dict[str, Any] = {"chat_id": chat_id, "message_id": message_id, "reply_markup": markup}
        try:
            await self._html_or_plain(
                "edit",
                lambda: self.bot.edit_message_text(text=part.html, parse_mode=ParseMode.HTML, **common),
                lambda: self.bot.edit_message_text(text=part.plain, **common),
                wait_on_flood=wait_on_flood)
        except BadRequest as exc:
            if _not_modified(exc):
                return True
            raise DeliveryError(f"telegram edit failed: {exc.message}") from exc
        return True

    async def send_file(self, chat_id: int, name: str, data: bytes, *, caption: str = "",
                        media_type: str = "", thread_id: int | None = None) -> Message:
        """Upload a file: as a photo when Telegram would show it as one, else as a document
        (also when the photo upload is refused, e.g. for its proportions)."""
        common: dict[str, Any] = {"chat_id": chat_id, "caption": caption[:CAPTION_LIMIT] or None,
                                  "message_thread_id": thread_id, "write_timeout": UPLOAD_TIMEOUT,
                                  "read_timeout": UPLOAD_TIMEOUT}
        try:
            if media_type in ("image/jpeg", "image/png") and len(data) <= MAX_PHOTO_BYTES:
                try:
                    return await self._retrying(lambda: self.bot.send_photo(
                        photo=InputFile(data, filename=name), **common))
                except BadRequest as exc:
                    log.info("telegram refused %s as a photo (%s); sending it as a document",
                             name, exc.message)
            return await self._retrying(lambda: self.bot.send_document(
                document=InputFile(data, filename=name), **common))
        except TelegramError as exc:
            raise DeliveryError(f"telegram file upload failed: {exc.message}") from exc

    async def send_voice(self, chat_id: int, data: bytes, duration: float, *,
                         reply_to: int | None = None, thread_id: int | None = None) -> Message:
        """An OGG/Opus voice message; as an audio file when the person's privacy settings
        refuse voice messages from bots."""
        reply = ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to else None
        common: dict[str, Any] = {"chat_id": chat_id, "message_thread_id": thread_id,
                                  "reply_parameters": reply, "write_timeout": UPLOAD_TIMEOUT,
                                  "read_timeout": UPLOAD_TIMEOUT}
        try:
            try:
                return await self._retrying(lambda: self.bot.send_voice(
                    voice=InputFile(data, filename="voice-reply.ogg"),
                    duration=max(1, round(duration)), **common))
            except BadRequest as exc:
                if "voice_messages_forbidden" not in exc.message.lower():
                    raise
                log.info("telegram chat %s refuses voice messages; sending an audio file", chat_id)
            return await self._retrying(lambda: self.bot.send_document(
                document=InputFile(data, filename="voice-reply.ogg"), **common))
        except TelegramError as exc:
            raise DeliveryError(f"telegram voice upload failed: {exc.message}") from exc

    async def typing(self, chat_id: int) -> None:
        """Best effort: a missed typing indicator is not worth a retry or an error."""
        try:
            await self.bot.send_chat_action(chat_id=chat_id, action=ChatAction.TYPING)
        except TelegramError as exc:
            log.debug("typing indicator for %s not sent: %s", chat_id, exc)
