"""Sending on WhatsApp so that nothing is dropped: formatting with a plain fallback, files,
interactive messages, and the 24-hour window.

- A text goes out formatted first; a refusal of that message (other than the window or a rate
  limit) resends it as plain text. What still fails is a `DeliveryError`, logged by the sink.
- WhatsApp accepts free-form messages only within 24 hours of the person's last message
  (`seen` records when we received each one, by our clock). The API is the authority: its
  131047 raises `OutsideWindow`, and the caller falls back to a template (`template`) or holds
  the message (bot/conversation/outbound.py) for when the person writes again. Only an
  unattended send (a job's result, a reminder, an approver's copy: any kind but "reply") is
  refused here first, when this process received the person's last message more than 24 hours
  ago; a reply to someone who just wrote always goes to the API.
- Each sent message is written down (`agent.sent`, in the store), so a `failed` status callback
  arriving later, even after a restart or at another replica, can be retried (rate limits) or
  reported, and a reply quoting it can be read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from bot.core.ports import Sent, SentPort
from channels.whatsapp import texts
from channels.whatsapp.graph import Graph, GraphError
from channels.whatsapp.rendering import Part, split_message

log = logging.getLogger(__name__)

WINDOW_SECONDS = 24 * 3600.0
TEMPLATE_TEXT_LIMIT = 1000      # a template body parameter's share of the template's 1,024
MAX_IMAGE_BYTES = 5_000_000     # WhatsApp's image limit; larger or other types go as documents
IMAGE_TYPES = ("image/jpeg", "image/png")
CAPTION_LIMIT = 1024


class DeliveryError(Exception):
    """A message could not be delivered even after the fallbacks."""


class OutsideWindow(Exception):
    """More than 24 hours since the person's last message: only a template may be sent."""


class Messenger:
    def __init__(self, graph: Graph, outbox: SentPort, templates: dict[str, str],
                 language: str, clock: Callable[[], float] = time.time):
        self.graph = graph
        self.outbox = outbox
        self.templates = templates
        self.language = language
        self.clock = clock
        self._last_seen: dict[str, float] = {}

    # --- the window --------------------------------------------------------------------------

    def seen(self, wa_id: str, at: float) -> None:
        """We received the person's message at `at` (our clock): the window is open 24 h."""
        if at > self._last_seen.get(wa_id, 0.0):
            self._last_seen[wa_id] = at

    def known_closed(self, wa_id: str, kind: str = "job") -> bool:
        """True when an unattended send (`kind` other than "reply") is known to be outside the
        window: this process received the person's last message more than 24 hours ago.
        A reply, or a person not seen here, is the API's to decide."""
        if kind == "reply":
            return False
        last = self._last_seen.get(wa_id)
        return last is not None and self.clock() - last > WINDOW_SECONDS

    # --- sending ----------------------------------------------------------------------------

    async def _post(self, to: str, message: dict[str, Any], kind: str, text: str) -> str:
        if self.known_closed(to, kind):
            raise OutsideWindow()
        payload = {"to": to, **message}
        try:
            wamid = await self.graph.send(payload)
        except GraphError as exc:
            if exc.outside_window:
                raise OutsideWindow() from exc
            raise
        await self.outbox.remember(wamid, Sent(to, kind, text, payload))
        return wamid

    async def send_part(self, to: str, part: Part, *, reply_to: str | None = None,
                        kind: str = "reply") -> str:
        context = {"context": {"message_id": reply_to}} if reply_to else {}

        def body(text: str) -> dict[str, Any]:
            return {"type": "text", "text": {"body": text, "preview_url": False}, **context}
        try:
            try:
                return await self._post(to, body(part.text), kind, part.plain)
            except GraphError as exc:
                if part.text == part.plain or exc.code in (0, 130429, 131056):
                    raise
                log.info("whatsapp refused a formatted message (%s); resending as plain text",
                         exc)
            return await self._post(to, body(part.plain), kind, part.plain)
        except GraphError as exc:
            raise DeliveryError(f"whatsapp message failed: {exc}") from exc

    async def send_markdown(self, to: str, markdown: str, *, reply_to: str | None = None,
                            kind: str = "reply") -> list[str]:
        return [await self.send_part(to, part, reply_to=reply_to if i == 0 else None, kind=kind)
                for i, part in enumerate(split_message(markdown))]

    async def send_interactive(self, to: str, message: dict[str, Any], text: str, *,
                               kind: str = "reply", reply_to: str | None = None) -> str:
        if reply_to:
            message = {**message, "context": {"message_id": reply_to}}
        try:
            return await self._post(to, message, kind, text)
        except GraphError as exc:
            raise DeliveryError(f"whatsapp interactive message failed: {exc}") from exc

    async def send_file(self, to: str, name: str, data: bytes, *, caption: str = "",
                        media_type: str = "", kind: str = "reply") -> str:
        """As an image when WhatsApp shows it as one, else as a document."""
        as_image = media_type in IMAGE_TYPES and len(data) <= MAX_IMAGE_BYTES
        kind_of_media = "image" if as_image else "document"
        try:
            if self.known_closed(to, kind):
                raise OutsideWindow()
            media_id = await self.graph.upload(name, data, media_type or "application/octet-stream")
            media: dict[str, Any] = {"id": media_id}
            if caption:
                media["caption"] = caption[:CAPTION_LIMIT]
            if not as_image:
                media["filename"] = name
            return await self._post(to, {"type": kind_of_media, kind_of_media: media}, kind,
                                    caption or name)
        except GraphError as exc:
            raise DeliveryError(f"whatsapp file upload failed: {exc}") from exc

    async def send_voice(self, to: str, data: bytes, *, kind: str = "reply") -> str:
        """An OGG/Opus voice note (WhatsApp plays mono OGG/Opus audio as one)."""
        try:
            if self.known_closed(to, kind):
                raise OutsideWindow()
            media_id = await self.graph.upload("voice-reply.ogg", data, "audio/ogg")
            return await self._post(to, {"type": "audio", "audio": {"id": media_id, "voice": True}},
                                    kind, texts.VOICE_NOTE)
        except GraphError as exc:
            raise DeliveryError(f"whatsapp voice note failed: {exc}") from exc

    async def template(self, to: str, kind: str, text: str, *, more: str) -> bool:
        """The approved template for `kind` carrying `text` (False when none is configured),
        cut with `more` (the reader's words) when longer than a template takes. Templates may
        be sent outside the window: that is what they are for."""
        name = self.templates.get(kind, "")
        if not name:
            return False
        if len(text) > TEMPLATE_TEXT_LIMIT:
            text = text[:TEMPLATE_TEXT_LIMIT - len(more)] + more
        # A template parameter may not hold newlines or long runs of spaces.
        flat = " · ".join(line.strip() for line in text.splitlines() if line.strip())
        payload = {"to": to, "type": "template", "template": {
            "name": name, "language": {"code": self.language},
            "components": [{"type": "body", "parameters": [{"type": "text", "text": flat}]}]}}
        try:
            wamid = await self.graph.send(payload)
        except GraphError as exc:
            raise DeliveryError(f"whatsapp template {name!r} failed: {exc}") from exc
        await self.outbox.remember(wamid, Sent(to, kind, text, payload))
        return True

    async def resend(self, sent: Sent) -> str:
        """Send a remembered message again (after a rate-limited `failed` status)."""
        wamid = await self.graph.send(sent.payload)
        await self.outbox.remember(wamid, Sent(sent.to, sent.kind, sent.text, sent.payload,
                                               retried=True))
        return wamid

    async def mark_read(self, message_id: str, *, typing: bool) -> None:
        await self.graph.mark_read(message_id, typing=typing)
