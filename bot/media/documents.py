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


def supported_sentence(limits: MediaLimits) -> str:
    common = [t for t in COMMON_TEXT_TYPES if t in limits.text_types]
    ordered = common + [t for t in limits.text_types if t not in common]
    shown = ", ".join(ordered[:8]) + (", …" if len(ordered) > 8 else "")
    return (f"I can read photos (JPEG, PNG, GIF, WebP), PDF files, and text, code, CSV, JSON and "
            f"Markdown files ({shown}); voice notes when transcription is enabled.")


def prepare_document(data: bytes, name: str, limits: MediaLimits) -> PreparedDocument:
    shown = name or "this file"
    if not data:
        raise MediaRefused(f"{shown} is empty (0 bytes).")
    if len(data) > limits.max_document_bytes:
        raise MediaRefused(f"{shown} is too large ({megabytes(len(data))}; the limit for "
                           f"documents is {megabytes(limits.max_document_bytes)}).")
    if data.startswith(PDF_MAGIC):
        return PreparedDocument("pdf", data, pages=_pdf_pages(data, shown, limits))
    suffix = PurePosixPath(name.lower()).suffix
    if suffix not in limits.text_types:
        raise MediaRefused(f"I can't read {shown}: {supported_sentence(limits)}")
    text = _text(data, shown)
    if len(text) > limits.max_text_chars:
        raise MediaRefused(f"{shown} is too long ({len(text):,} characters; the limit is "
                           f"{limits.max_text_chars:,}). Send a shorter part of it.")
    return PreparedDocument("text", text.encode("utf-8"), media_type="text/plain", chars=len(text))


def prepare_document_file(path: str, name: str, limits: MediaLimits) -> PreparedDocument:
    """`prepare_document` in a worker process: the upload comes in as a private file, and a PDF
    (kept as it is) comes back without its bytes: the caller has them."""
    data = Path(path).read_bytes()
    prepared = prepare_document(data, name, limits)
    return replace(prepared, data=b"") if prepared.data is data else prepared


def _text(data: bytes, shown: str) -> str:
    if b"\x00" in data:
        raise MediaRefused(f"{shown} looks binary (it contains NUL bytes), not like a text file.")
    # Bytes that are not UTF-8 (a Latin-1 "é") are read as U+FFFD, not refused: the rest of
    # the file is still worth reading.
    return valid_text(data.removeprefix(b"\xef\xbb\xbf"))


def _pdf_pages(data: bytes, shown: str, limits: MediaLimits) -> int:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            raise MediaRefused(f"{shown} is password-protected; send an unprotected copy.")
        pages = len(reader.pages)
    except MediaRefused:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError,
            RecursionError) as exc:
        log.info("an uploaded PDF could not be parsed: %s", type(exc).__name__)
        raise MediaRefused(f"{shown} is not a readable PDF (it is damaged or incomplete).") from exc
    if pages == 0:
        raise MediaRefused(f"{shown} has no pages.")
    if pages > limits.max_pdf_pages:
        raise MediaRefused(f"{shown} has {pages} pages; the limit is {limits.max_pdf_pages}. "
                           "Send the pages that matter as a smaller PDF.")
    return pages
