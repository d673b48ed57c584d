"""Attachments of a Telegram message, downloaded with PTB (`get_file` + `download_to_memory`).

Photos (the largest size Telegram offers), image documents, other documents, voice notes and
audio become the core's typed parts. The file URL PTB builds holds the bot token, so nothing
here logs, returns or stores it: the core gets bytes, and a failure is logged by exception
class only (an aiohttp error's text can quote the URL).

Sizes: what Telegram declares is checked against `[media]` before downloading, and against
the Bot API's own limit (bots may download files up to 20 MB).
"""

from __future__ import annotations

import io
import logging
from typing import Any

from telegram import Bot, Message
from telegram.error import TelegramError

from bot.core.events import AudioPart, DocumentPart, ImagePart, Part, UnavailablePart
from bot.language.phrase import Phrase, size_phrase

log = logging.getLogger(__name__)

BOT_API_DOWNLOAD_LIMIT = 20 * 1024 * 1024
DOWNLOAD_READ_TIMEOUT = 60.0


def _too_large(name: str, size: int, limit: int) -> UnavailablePart:
    # A Phrase: the core tells the sender why, in their language.
    return UnavailablePart(name, Phrase("it is {size}; the limit is {limit}",
                                        size=size_phrase(size), limit=size_phrase(limit)))


def has_attachments(message: Message) -> bool:
    """Whether the message carries a file that `Attachments.parts` would fetch."""
    return bool(message.photo or message.document or message.voice or message.audio)


class Attachments:
    def __init__(self, bot: Bot, media: dict[str, Any]):
        self.bot = bot
        self.media = media

    async def parts(self, message: Message) -> tuple[Part, ...]:
        found: list[Part] = []
        if message.photo:
            largest = message.photo[-1]
            data = await self._fetch(largest.file_id, largest.file_size, "photo.jpg",
                                     self.media["max_image_bytes"])
            found.append(data if isinstance(data, UnavailablePart) else
                         ImagePart(data, "image/jpeg", "photo.jpg", largest.width, largest.height))
        if message.document:
            found.append(await self._document(message))
        for audio, name in ((message.voice, "voice.ogg"), (message.audio, "audio")):
            if audio is None:
                continue
            name = getattr(audio, "file_name", None) or name
            data = await self._fetch(audio.file_id, audio.file_size, name, self.media["max_audio_bytes"])
            # Only a voice note the sender recorded is their own words; a forwarded one, one an
            # inline bot sent, or an audio file (a recording of anyone) is someone else's.
            own = audio is message.voice and message.forward_origin is None \
                and message.via_bot is None
            found.append(data if isinstance(data, UnavailablePart) else
                         AudioPart(data, name, audio.mime_type or "audio/ogg", spoken_by_sender=own))
        return tuple(found)

    async def _document(self, message: Message) -> Part:
        document = message.document
        assert document is not None
        name = document.file_name or "document"
        mime = (document.mime_type or "").lower()
        image, audio = mime.startswith("image/"), mime.startswith("audio/")
        limit = self.media["max_image_bytes"] if image else \
            self.media["max_audio_bytes"] if audio else self.media["max_document_bytes"]
        data = await self._fetch(document.file_id, document.file_size, name, limit)
        if isinstance(data, UnavailablePart):
            return data
        if audio:       # an audio file sent as a document: a recording, someone else's words
            return AudioPart(data, name, mime, spoken_by_sender=False)
        return ImagePart(data, mime, name) if image else DocumentPart(data, name, mime)

    async def _fetch(self, file_id: str, size: int | None, name: str, limit: int) -> bytes | UnavailablePart:
        if size and size > limit:
            return _too_large(name, size, limit)
        if size and size > BOT_API_DOWNLOAD_LIMIT:
            return UnavailablePart(name, Phrase(
                "it is {size}, and Telegram lets bots download files up to {limit}",
                size=size_phrase(size), limit=size_phrase(BOT_API_DOWNLOAD_LIMIT)))
        try:
            handle = await self.bot.get_file(file_id)
            out = io.BytesIO()
            await handle.download_to_memory(out, read_timeout=DOWNLOAD_READ_TIMEOUT)
        except TelegramError as exc:
            log.warning("telegram: downloading an attachment failed (%s)", type(exc).__name__)
            return UnavailablePart(name, Phrase("the download from Telegram failed; please send "
                                                "it again"))
        data = out.getvalue()
        if len(data) > limit:
            return _too_large(name, len(data), limit)
        return data
