"""Attachments of a WhatsApp message, fetched through the Graph API's media endpoint.

A message names its media by id: `GET /{media-id}` (with the access token) answers the file's
short-lived URL, declared type, size and SHA-256, and `GET url` (with the token again) the bytes.
The declared size is checked against `[media]` before downloading, the download stops once it
passes the limit, and the bytes must match the declared SHA-256 (when one is declared: an absent
or ill-formed hash is not checked). The URL gets the token only where graph.py allows. The type
the platform declares is only a hint: the core reads the content (bot/media). This runs only
once the agent has admitted the sender (`IncomingMessage.download`), so a stranger's file is
never fetched.

Stickers, locations and other kinds the bot cannot use become `UnavailablePart`s with a polite
reason (a Phrase: the core tells the sender in their language) and makes no model call.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
from typing import Any

from bot.core.events import AudioPart, DocumentPart, ImagePart, Part, UnavailablePart
from bot.language.phrase import Phrase, size_phrase
from channels.whatsapp import texts
from channels.whatsapp.graph import Graph, GraphError

log = logging.getLogger(__name__)

MEDIA_KINDS = ("image", "document", "audio", "video")
REFUSED = {"sticker": (texts.STICKER_NAME, texts.STICKER_REFUSED),
           "location": (texts.LOCATION_NAME, texts.LOCATION_REFUSED)}
USED_KINDS = ("text", "interactive", "button", *MEDIA_KINDS)
OGG_TYPES = ("audio/ogg", "audio/opus")


def has_attachments(message: dict[str, Any]) -> bool:
    """Whether the message carries something `Attachments.parts` turns into parts."""
    kind = message.get("type", "")
    return kind in MEDIA_KINDS or kind not in USED_KINDS


def refusal(kind: str) -> UnavailablePart:
    if kind in REFUSED:
        name, reason = REFUSED[kind]
        return UnavailablePart(Phrase(name), Phrase(reason))
    # The kind is WhatsApp's own word for it ("video", "contacts"): shown as it is.
    return UnavailablePart(Phrase(texts.UNSUPPORTED_NAME, kind=kind or "?"),
                           Phrase(texts.UNSUPPORTED_REFUSED))


def spoken_by_sender(message: dict[str, Any], body: dict[str, Any], declared: str,
                     data: bytes) -> bool:
    """Whether an audio message is the sender's own words. A voice note recorded in the chat is
    (WhatsApp records them as OGG/Opus; the `voice` flag is not always there); a forwarded one
    is someone else's, and so is an audio file shared (`"voice": false`, an mp3 or m4a): a
    recording of anyone, its transcript untrusted data."""
    context = message.get("context") or {}
    if context.get("forwarded") or context.get("frequently_forwarded"):
        return False
    ogg = declared in OGG_TYPES or data[:4] == b"OggS"
    return not (body.get("voice") is False and not ogg)


class Attachments:
    def __init__(self, graph: Graph, media: dict[str, Any]):
        self.graph = graph
        self.media = media

    async def parts(self, message: dict[str, Any]) -> tuple[Part, ...]:
        kind = message.get("type", "")
        if kind not in MEDIA_KINDS:
            return (refusal(kind),)
        body = message.get(kind) or {}
        declared = str(body.get("mime_type") or "").split(";")[0].strip().lower()
        if kind == "video":
            return (refusal("video"),)
        if kind == "image":
            limit, name = self.media["max_image_bytes"], "photo.jpg"
        elif kind == "audio":
            limit, name = self.media["max_audio_bytes"], "voice.ogg"
        else:
            name = str(body.get("filename") or "document")
            limit = self.media["max_image_bytes"] if declared.startswith("image/") else \
                self.media["max_audio_bytes"] if declared.startswith("audio/") else \
                self.media["max_document_bytes"]
        data = await self._fetch(str(body.get("id") or ""), name, limit)
        if isinstance(data, UnavailablePart):
            return (data,)
        if kind == "image":
            return (ImagePart(data, declared or "image/jpeg", name),)
        if kind == "audio":
            own = spoken_by_sender(message, body, declared, data)
            return (AudioPart(data, name, declared or "audio/ogg", spoken_by_sender=own),)
        if declared.startswith("audio/"):
            return (AudioPart(data, name, declared, spoken_by_sender=False),)
        if declared.startswith("image/"):
            return (ImagePart(data, declared, name),)
        return (DocumentPart(data, name, declared),)

    async def _fetch(self, media_id: str, name: str, limit: int) -> bytes | UnavailablePart:
        try:
            info = await self.graph.media_info(media_id)
            size = info.get("file_size")
            if isinstance(size, int) and size > limit:
                return UnavailablePart(name, Phrase(texts.MEDIA_TOO_LARGE, size=size_phrase(size),
                                                    limit=size_phrase(limit)))
            data = await self.graph.download(info["url"], limit)
        except GraphError as exc:
            log.warning("whatsapp: downloading an attachment failed: %s", exc)   # no URL in it
            return UnavailablePart(name, Phrase(texts.MEDIA_FAILED))
        if data is None:
            over = Phrase(texts.MEDIA_OVER, size=size_phrase(limit))
            return UnavailablePart(name, Phrase(texts.MEDIA_TOO_LARGE, size=over,
                                                limit=size_phrase(limit)))
        declared = declared_sha256(info.get("sha256"))
        if declared is not None and declared != hashlib.sha256(data).digest():
            log.warning("whatsapp: an attachment did not match its declared SHA-256")
            return UnavailablePart(name, Phrase(texts.MEDIA_FAILED))
        return data


def declared_sha256(value: Any) -> bytes | None:
    """The 32-byte digest the media lookup declared (Meta writes it in hex in some answers and
    in base64 in others); None when absent or not a SHA-256 at all, which is then not checked
    (the download came from Meta with our token; only a real hash can prove it wrong)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if re.fullmatch(r"[0-9a-fA-F]{64}", text):
        return bytes.fromhex(text)
    if re.fullmatch(r"[A-Za-z0-9+/_-]{43}=?", text):
        try:
            digest = base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_")
                                              .rstrip("=") + "=")
        except ValueError:
            return None
        return digest if len(digest) == 32 else None
    return None
