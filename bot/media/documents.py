"""Documents: a PDF goes to the model as a `document` block; text, code, CSV, JSON and Markdown
as text; anything else is refused with a sentence naming what is supported.

Synchronous and CPU-bound (pypdf parses the whole PDF): callers run it off the event loop.
The byte limit is checked before any parsing.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from bot.core.events import valid_text
from bot.language.phrase import Number, Phrase
from bot.media.limits import MediaLimits, MediaRefused, megabytes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedDocument:
    kind: str                  # "pdf" or "text"
    data: bytes = field(repr=False)   # the PDF, or the text as UTF-8
    media_type: str = "application/pdf"
    pages: int = 0
    chars: int = 0


COMMON_TEXT_TYPES = (".txt", ".md", ".py", ".csv", ".json")
PDF_MAGIC = b"%PDF-"


def supported_sentence(limits: MediaLimits) -> Phrase:
    common = [t for t in COMMON_TEXT_TYPES if t in limits.text_types]
    ordered = common + [t for t in limits.text_types if t not in common]
    shown = ", ".join(ordered[:8]) + (", …" if len(ordered) > 8 else "")
    return Phrase("I can read photos (JPEG, PNG, GIF, WebP), PDF files, and text, code, CSV, JSON "
                  "and Markdown files ({types}); voice notes when transcription is enabled.",
                  types=shown)


def prepare_document(data: bytes, name: str, limits: MediaLimits) -> PreparedDocument:
    shown = name or Phrase("this file")
    if not data:
        raise MediaRefused(Phrase("{name} is empty (0 bytes).", name=shown))
    if len(data) > limits.max_document_bytes:
        raise MediaRefused(Phrase("{name} is too large ({size}; the limit for documents is "
                                  "{limit}).", name=shown, size=megabytes(len(data)),
                                  limit=megabytes(limits.max_document_bytes)))
    if data.startswith(PDF_MAGIC):
        return PreparedDocument("pdf", data, pages=_pdf_pages(data, shown, limits))
    suffix = PurePosixPath(name.lower()).suffix
    if suffix not in limits.text_types:
        raise MediaRefused(Phrase("I can't read {name}: {supported}", name=shown,
                                  supported=supported_sentence(limits)))
    text = _text(data, shown)
    if len(text) > limits.max_text_chars:
        raise MediaRefused(Phrase("{name} is too long ({chars} characters; the limit is {limit}). "
                                  "Send a shorter part of it.", name=shown,
                                  chars=Number(len(text)), limit=Number(limits.max_text_chars)))
    return PreparedDocument("text", text.encode("utf-8"), media_type="text/plain", chars=len(text))


def prepare_document_file(path: str, name: str, limits: MediaLimits) -> PreparedDocument:
    """`prepare_document` in a worker process: the upload comes in as a private file, and a PDF
    (kept as it is) comes back without its bytes: the caller has them."""
    data = Path(path).read_bytes()
    prepared = prepare_document(data, name, limits)
    return replace(prepared, data=b"") if prepared.data is data else prepared


def _text(data: bytes, shown: str) -> str:
    if b"\x00" in data:
        raise MediaRefused(Phrase("{name} looks binary (it contains NUL bytes), not like a text "
                                  "file.", name=shown))
    # Bytes that are not UTF-8 (a Latin-1 "é") are read as U+FFFD, not refused: the rest of
    # the file is still worth reading.
    return valid_text(data.removeprefix(b"\xef\xbb\xbf"))


def _pdf_pages(data: bytes, shown: str, limits: MediaLimits) -> int:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            raise MediaRefused(Phrase("{name} is password-protected; send an unprotected copy.",
                                      name=shown))
        pages = len(reader.pages)
    except MediaRefused:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError,
            RecursionError) as exc:
        log.info("an uploaded PDF could not be parsed: %s", type(exc).__name__)
        raise MediaRefused(Phrase("{name} is not a readable PDF (it is damaged or incomplete).",
                                  name=shown)) from exc
    if pages == 0:
        raise MediaRefused(Phrase("{name} has no pages.", name=shown))
    if pages > limits.max_pdf_pages:
        raise MediaRefused(Phrase("{name} has {pages} pages; the limit is {limit}. Send the pages "
                                  "that matter as a smaller PDF.", name=shown, pages=pages,
                                  limit=limits.max_pdf_pages))
    return pages
