"""One incoming message's attachments → the content blocks of its user turn.

Each part is checked on its own: a refused part becomes one clear notice to the sender (and a
short note to the model, so it knows something was left out) while the caption and every other
part still go through. CPU-bound work (Pillow, pypdf) runs in the worker processes of
`bot.toolbox.offload`, each job within a time budget: pypdf is pure Python and would hold the GIL in a
thread, and a hostile file then costs a worker, not the bot. What the model
gets (see attachments.py): reference blocks for photos and documents, the transcript of a voice
note as the sender's own text — or, when someone else spoke it (a forwarded voice note, an audio
file), as untrusted data, like text taken from a document.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from bot.access.workspaces import workspace_for
from bot.config.settings import Config
from bot.core.errors import LLMError
from bot.core.events import (
    AudioPart,
    DocumentPart,
    ImagePart,
    IncomingMessage,
    Notice,
    Origin,
    Part,
    Sink,
    part_origin,
)
from bot.core.ports import PaidCallsPort, Payer
from bot.core.wrap import wrap_untrusted
from bot.language.phrase import Number, Phrase
from bot.media.attachments import (
    PDF_PAGE_TOKENS,
    TEXT_CHARS_PER_TOKEN,
    AttachmentStore,
    expand,
    holds_reference,
    is_reference,
    recent_hashes,
    reference,
    tokens_of,
)
from bot.media.documents import PDF_MAGIC, prepare_document_file
from bot.media.images import prepare_image_file, sniff_image
from bot.media.limits import MediaLimits, MediaRefused, megabytes
from bot.media.received import AUDIO_SUFFIXES, Inbox, shown_name
from bot.media.transcribe import HOW_TO_ENABLE, Transcriber, TranscriptionError
from bot.store.protocol import Store
from bot.toolbox.offload import OverBudget, run_off_loop

log = logging.getLogger(__name__)

Block = dict[str, Any]
IMAGE_KIND_SUFFIX = {"jpeg": ".jpg", "png": ".png", "gif": ".gif", "webp": ".webp"}
# A 25 MB, 60-megapixel image takes well under a second here; a hostile PDF can take pypdf
# much longer than any real one.
IMAGE_BUDGET_SECONDS = 15.0
DOCUMENT_BUDGET_SECONDS = 15.0


@dataclass(frozen=True)
class Uploader:
    """Whose inbox quota an upload counts against, and the folder it lands in."""

    sender: str
    workspace: Path


class MediaIntake:
    def __init__(self, config: Config, store: Store, paid: PaidCallsPort):
        """`paid`: the gate transcriptions go through (bot.money.gate)."""
        self.config = config
        self.paid = paid
        self.limits = MediaLimits.from_config(self.config["media"])
        self.attachments = AttachmentStore(store, self.config.data_dir / "attachments")
        self.inbox = Inbox(store, self.limits.inbox_quota_bytes)
        self.transcriber = Transcriber(self.config)
        # What the attachments shown in full may take of a prompt, all together: half the
        # history's budget (the rest is the conversation, compacted to fit its own budget).
        self.max_attachment_tokens = self.config["agent"]["context_budget_tokens"] // 2

    def workspace(self, sender: str) -> Path:
        """Where `sender`'s uploads land: the workspace their file tools see."""
        return workspace_for(self.config, sender)

    # --- in: a message's parts ------------------------------------------------------------

    async def user_content(self, message: IncomingMessage, sink: Sink, payer: Payer,
                           workspace: Path | None = None) -> list[Block]:
        """The user message's blocks; [] when nothing usable is left (the sender was told).
        `payer`: whose budget a transcription counts against; `workspace`: where uploads land
        (the folder the turn's file tools see: a group's own under per_sender workspaces),
        by default the sender's."""
        uploader = Uploader(payer.sender, workspace or self.workspace(payer.sender))
        attached: list[Block] = []
        spoken: list[Block] = []
        notes: list[str] = []
        for part in message.parts:
            # The name is the sender's (or whoever made the file): from here on only its shown
            # form. A Phrase is the channel's own words for it ("a sticker"): said in the
            # sender's language.
            if not isinstance(part.name, Phrase):
                part = dataclasses.replace(part, name=shown_name(part.name))
            origin = part_origin(part, forwarded=bool(message.forwarded_from))
            try:
                blocks = await self._part(payer, uploader, part, origin, sink)
            except MediaRefused as exc:
                await sink.emit(Notice(Phrase("⚠️ {message}", message=exc.message)))
                notes.append(f"[The user also sent {_name(part)}, which could not be used: "
                             f"{exc.message}]")
                continue
            (attached if any(is_reference(b) for b in blocks) else spoken).extend(blocks)
        if not attached and not spoken and not message.text.strip():
            return []
        text = "\n".join([*notes, message.text] if message.text.strip() else notes)
        return [*attached, *spoken, *([{"type": "text", "text": text}] if text else [])]

    async def _part(self, payer: Payer, uploader: Uploader, part: Part, origin: Origin,
                    sink: Sink) -> list[Block]:
        """The blocks of one part, marked with where its content came from (`origin`)."""
        if isinstance(part, ImagePart | DocumentPart):
            # By content, whatever the platform declared: a photo sent "as a file" is a photo, a
            # PDF declared as an image is a document (anything else declared as an image is
            # refused as one).
            if sniff_image(part.data) is not None or (
                    isinstance(part, ImagePart) and not part.data.startswith(PDF_MAGIC)):
                seen = Origin.ATTACHMENT if origin is Origin.DOCUMENT else origin   # a picture
                return [await self._image(uploader, part.data, part.name, seen, sink)]
            document = DocumentPart(part.data, part.name, part.media_type)
            return [await self._document(uploader, document, origin, sink)]
        if isinstance(part, AudioPart):
            return await self._audio(payer, uploader, part, origin, sink)
        # The channel's reason may be a Phrase: the sender reads all of it in their language.
        raise MediaRefused(Phrase("I could not fetch {name}: {reason}",
                                  name=part.name or Phrase("an attachment"), reason=part.reason))

    async def _image(self, uploader: Uploader, data: bytes, name: str, origin: Origin,
                     sink: Sink) -> Block:
        prepared = await _in_worker(prepare_image_file, data, self.limits,
                                    budget=IMAGE_BUDGET_SECONDS)
        kind = sniff_image(data) or "jpeg"
        saved = await self._save(uploader, name, IMAGE_KIND_SUFFIX[kind], "photo", data, sink)
        digest = await self.attachments.put("image", prepared.media_type, prepared.data)
        # What a picture shows (a screenshot of instructions, a QR code) is not the sender's
        # typing: data, like a document's text.
        return reference("image", digest, prepared.media_type, name=name, saved_as=saved,
                         untrusted=origin.taints, origin=origin,
                         width=prepared.original_width, height=prepared.original_height)

    async def _document(self, uploader: Uploader, part: DocumentPart, origin: Origin,
                        sink: Sink) -> Block:
        prepared = await _in_worker(prepare_document_file, part.data, part.name, self.limits,
                                    budget=DOCUMENT_BUDGET_SECONDS)
        sizes = {"pages": prepared.pages} if prepared.kind == "pdf" else {"chars": prepared.chars}
        if tokens_of({"kind": prepared.kind, **sizes}) > self.max_attachment_tokens:
            raise self._too_long(part.name or "This document", prepared.pages, prepared.chars)
        suffix = ".pdf" if prepared.kind == "pdf" else PurePosixPath(part.name.lower()).suffix
        saved = await self._save(uploader, part.name, suffix, "document", part.data, sink)
        digest = await self.attachments.put(prepared.kind, prepared.media_type, prepared.data)
        return reference(prepared.kind, digest, prepared.media_type, name=part.name,
                         saved_as=saved, untrusted=True, origin=origin, **sizes)

    def _too_long(self, name: str, pages: int, chars: int) -> MediaRefused:
        """More than the model's context can hold next to the conversation (see expand)."""
        if pages:
            fit = self.max_attachment_tokens // PDF_PAGE_TOKENS
            return MediaRefused(Phrase("{name} has {pages} pages; about {fit} fit in a "
                                       "conversation here. Send the pages that matter as a "
                                       "smaller PDF.", name=name, pages=pages, fit=fit))
        fit = self.max_attachment_tokens * TEXT_CHARS_PER_TOKEN
        return MediaRefused(Phrase("{name} is too long for a conversation here ({chars} "
                                   "characters; about {fit} fit). Send a shorter part of it.",
                                   name=name, chars=Number(chars), fit=Number(fit)))

    async def _audio(self, payer: Payer, uploader: Uploader, part: AudioPart, origin: Origin,
                     sink: Sink) -> list[Block]:
        if not part.data:
            raise MediaRefused(Phrase("This voice note is empty (0 bytes)."))
        if len(part.data) > self.limits.max_audio_bytes:
            raise MediaRefused(Phrase("This voice note is too large ({size}; the limit is "
                                      "{limit}).", size=megabytes(len(part.data)),
                                      limit=megabytes(self.limits.max_audio_bytes)))
        suffix = PurePosixPath(part.name.lower()).suffix
        saved = await self._save(uploader, part.name, suffix if suffix in AUDIO_SUFFIXES else ".audio",
                                 "voice", part.data, sink)
        if not self.transcriber.configured:
            raise MediaRefused(HOW_TO_ENABLE)
        try:
            text = await self._transcribed(payer, part)
        except LLMError as exc:   # over budget: refused before the service was called
            raise MediaRefused(Phrase("I couldn't transcribe your voice note: {why}",
                                      why=exc.user_message)) from exc
        except TranscriptionError as exc:
            raise MediaRefused(Phrase(
                "I couldn't transcribe your voice note: {why}. It is saved as {path}. Please try "
                "again later, or type your message.", why=exc.message, path=saved) if saved
                else Phrase("I couldn't transcribe your voice note: {why}. Please try again "
                            "later, or type your message.", why=exc.message)) from exc
        if not text:
            raise MediaRefused(Phrase("I couldn't make out any words in that voice note."))
        if not origin.taints:   # a voice note the sender recorded: their own words
            await sink.emit(Notice(f"🎙 {text}"))
            return [{"type": "text", "text": text}]
        await sink.emit(Notice(Phrase("🎙 (someone else's recording) {transcript}",
                                      transcript=text)))
        # Someone else's words: data to consider, never the user's instructions.
        return [{"type": "text", "text": "The user sent a recording of someone else (a forwarded "
                 "voice note or an audio file). Its transcript:\n"
                 + wrap_untrusted({"transcript": text}, f"someone else's recording ({origin})")}]

    async def _transcribed(self, payer: Payer, part: AudioPart) -> str:
        """The transcript, through the paid-call gate: refused before the call when the payer
        is over a limit, its cost recorded once the service answered."""
        async with self.paid.call(payer, "transcription") as bill:
            text = await self.transcriber.transcribe(part.data, part.name, part.media_type)
            bill.charge(self.transcriber.model, cost=self.transcriber.cost_of(part.data))
        return text

    async def _save(self, uploader: Uploader, name: str, suffix: str, fallback: str, data: bytes,
                    sink: Sink) -> str:
        """The workspace path of the saved upload, or "" when it could not be saved (the
        attachment still reaches the model)."""
        try:
            return await self.inbox.save(uploader.workspace, uploader.sender, name, suffix,
                                         fallback, data)
        except MediaRefused as exc:
            await sink.emit(Notice(Phrase("⚠️ {message}", message=exc.message)))
        except OSError as exc:
            log.warning("upload not saved for %s: %s", uploader.sender,
                        exc.strerror or type(exc).__name__)
        return ""

    # --- out: the history as the model reads it -------------------------------------------

    async def expand(self, messages: list[Block]) -> list[Block]:
        """References → image/document blocks (recent) or placeholders (older); see attachments.py."""
        keep = self.limits.keep_images_turns
        wanted = recent_hashes(messages, keep, self.max_attachment_tokens)
        if not wanted and not holds_reference(messages):
            return messages
        return expand(messages, keep, await self.attachments.load(wanted))


async def _in_worker(fn: Any, data: bytes, *args: Any, budget: float) -> Any:
    """`fn(path, *args)` in a worker process, `path` a private copy of `data`; a result that
    came back without its bytes (unchanged, see images.py) gets `data` again."""
    try:
        path = await asyncio.to_thread(_spill, data)
    except OSError as exc:      # no room in the temporary directory: this file only is lost
        log.warning("no temporary copy of an upload: %s", exc.strerror or type(exc).__name__)
        raise MediaRefused(Phrase("I could not process this file right now (no room for a "
                                  "temporary copy); please send it again later.")) from exc
    try:
        prepared = await run_off_loop(fn, path, *args, budget=budget)
    except OverBudget as exc:
        raise MediaRefused(Phrase("This file took too long to process (it may be damaged or built "
                                  "to be slow); it was left out.")) from exc
    finally:
        os.unlink(path)
    return prepared if prepared.data else dataclasses.replace(prepared, data=data)


def _spill(data: bytes) -> str:
    fd, path = tempfile.mkstemp(prefix="myclaw-upload-")     # 0600, a name nobody chose
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


def _name(part: Part) -> str:
    name = getattr(part, "name", "")
    return repr(name) if name else {"ImagePart": "a photo", "AudioPart": "a voice note"}.get(
        type(part).__name__, "a file")
