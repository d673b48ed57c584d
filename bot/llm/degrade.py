"""A request fitted to what one model can do (bot/llm/capabilities.py), visibly.

No vision: each image becomes a placeholder line. No PDFs: each PDF becomes the text pypdf
extracts from it, wrapped as untrusted file data like any document. No tools: no catalog. The
person is told once per turn (the notices go back on the response; the runtime says them) when
their newest message carried what the model cannot see. Everything here is a pure function of
the request and the bytes, so the prompt's cached prefix stays byte-stable from step to step.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

from bot.core.wrap import wrap_untrusted
from bot.llm.capabilities import Capabilities
from bot.llm.pdf_text import FAILED, pdf_text

NO_VISION = ("The model in use ({model}) cannot see images, so it only got a line saying a "
             "photo was sent.")
NO_PDFS = ("The model in use ({model}) cannot read PDF files directly, so it got the text "
           "extracted from them (no pictures or layout).")
IMAGE_PLACEHOLDER = "[a photo is here, but the model in use cannot see images]"
PDF_BUDGET_SECONDS = 15.0
MAX_PDF_CHARS = 200_000
Block = dict[str, Any]


class Degrader:
    """Keeps the text of the PDFs it extracted (by content hash), so the steps of a turn do not
    parse the same file again."""

    def __init__(self, max_cached: int = 32):
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._max = max_cached

    async def fit(self, params: dict[str, Any], caps: Capabilities,
                  model: str) -> tuple[dict[str, Any], list[str]]:
        """`params` as this model can take them, and what to tell the person."""
        if caps.full:
            return params, []
        fitted = dict(params)
        if not caps.tools:
            fitted.pop("tools", None)
            fitted.pop("tool_choice", None)
        told: list[str] = []
        if not (caps.vision and caps.pdfs):
            messages, lost = await self._messages(params["messages"], caps)
            fitted["messages"] = messages
            if "image" in lost:
                told.append(NO_VISION.format(model=model))
            if "document" in lost:
                told.append(NO_PDFS.format(model=model))
        return fitted, told

    async def _messages(self, messages: list[Block], caps: Capabilities) -> tuple[list[Block], set[str]]:
        newest = _newest_human(messages)
        out, lost = [], set()
        for index, message in enumerate(messages):
            content = message.get("content")
            if not isinstance(content, list) or not _has_media(content):
                out.append(message)
                continue
            blocks, kinds = await self._blocks(content, caps)
            if index == newest:
                lost |= kinds
            out.append({**message, "content": blocks})
        return out, lost

    async def _blocks(self, content: list[Block], caps: Capabilities) -> tuple[list[Block], set[str]]:
        blocks, lost = [], set()
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "image" and not caps.vision:
                blocks.append({"type": "text", "text": IMAGE_PLACEHOLDER})
                lost.add("image")
            elif kind == "document" and not caps.pdfs:
                blocks.append({"type": "text", "text": await self._pdf(block)})
                lost.add("document")
            elif kind == "tool_result" and isinstance(block.get("content"), list) \
                    and _has_media(block["content"]):
                inner, _ = await self._blocks(block["content"], caps)
                blocks.append({**block, "content": inner})
            else:
                blocks.append(block)
        return blocks, lost

    async def _pdf(self, block: Block) -> str:
        from bot.toolbox.offload import OverBudget, run_off_loop

        data = block.get("source", {}).get("data", "")
        digest = hashlib.sha256(data.encode()).hexdigest()
        wrapped = self._texts.get(digest)
        if wrapped is None:
            try:
                text = await run_off_loop(pdf_text, data, MAX_PDF_CHARS, budget=PDF_BUDGET_SECONDS)
            except OverBudget:
                text = FAILED
            # Data, never instructions; kept as wrapped (nonce from the content, one time
            # stamp) so every step of the conversation sends the same bytes.
            wrapped = wrap_untrusted({"file": block.get("title", "PDF"), "content": text},
                                     "document:pdf", nonce=digest[:12])
            self._texts[digest] = wrapped
            while len(self._texts) > self._max:
                self._texts.popitem(last=False)
        return wrapped


def _has_media(content: list[Any]) -> bool:
    for block in content:
        if isinstance(block, dict) and block.get("type") in ("image", "document", "tool_result"):
            return True
    return False


def _newest_human(messages: list[Block]) -> int:
    """The index of the newest message a person wrote (more than tool results), or -1."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") != "tool_result" for b in content):
            return index
    return -1
