"""The text of a PDF, for a model that cannot read PDFs itself.

Synchronous and CPU-bound (pypdf is pure Python): bot/llm/degrade.py runs it in the worker
processes of bot.toolbox.offload, within a time budget.
"""

from __future__ import annotations

import base64
import io

from bot.core.events import valid_text

FAILED = "(the text of this PDF could not be extracted)"


def pdf_text(data_b64: str, max_chars: int) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(base64.b64decode(data_b64)), strict=False)
        pages, size = [], 0
        for number, page in enumerate(reader.pages, 1):
            text = page.extract_text() or ""
            pages.append(f"--- page {number} ---\n{text}")
            size += len(text)
            if size >= max_chars:
                break
        return valid_text("\n".join(pages)[:max_chars])
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError, RecursionError):
        return FAILED
