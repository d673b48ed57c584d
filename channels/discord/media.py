"""Attachments of a Discord message, fetched with discord.py's `Attachment.read()`.

Images become image parts, audio (voice messages included) audio parts, anything else a
document part; the core checks each by content. The declared size is checked against `[media]`
before anything is downloaded; a failed download becomes an `UnavailablePart` with the reason.
The CDN URL goes nowhere: the core gets bytes.
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import discord

from bot.core.events import AudioPart, DocumentPart, ImagePart, Part, UnavailablePart
from bot.language.phrase import Phrase, size_phrase

log = logging.getLogger(__name__)


async def attachment_parts(attachments: list[discord.Attachment], media: dict[str, Any]) -> tuple[Part, ...]:
    return tuple([await _part(a, media) for a in attachments])


async def _part(attachment: discord.Attachment, media: dict[str, Any]) -> Part:
    kind = (attachment.content_type or "").split(";")[0].strip().lower()
    name = attachment.filename or "attachment"
    if kind.startswith("image/"):
        limit = media["max_image_bytes"]
    elif kind.startswith("audio/") or attachment.is_voice_message():
        limit = media["max_audio_bytes"]
    else:
        limit = media["max_document_bytes"]
    if attachment.size > limit:
        # A Phrase: the core tells the sender why, in their language.
        return UnavailablePart(name, Phrase("it is {size}; the limit is {limit}",
                                            size=size_phrase(attachment.size),
                                            limit=size_phrase(limit)))
    try:
        data = await attachment.read()
    except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
        log.warning("discord: downloading an attachment failed (%s)", type(exc).__name__)
        return UnavailablePart(name, Phrase("the download from Discord failed; please send it "
                                            "again"))
    if kind.startswith("image/"):
        return ImagePart(data, kind, name, attachment.width or 0, attachment.height or 0)
    if attachment.is_voice_message():       # recorded by the sender: their own words
        return AudioPart(data, name, kind or "audio/ogg")
    if kind.startswith("audio/"):            # an audio file: a recording of anyone
        return AudioPart(data, name, kind, spoken_by_sender=False)
    return DocumentPart(data, name, kind)
