"""The `[media]` settings as one frozen value, and the refusal every check raises."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# What the Messages API uses of an image: a long edge up to 1568 px and about 1,600 tokens at
# 750 pixels a token; the sizes it documents as used unscaled go from 1092×1092 to 784×1568
# (1.23 megapixels). Larger is downscaled by the API anyway, after costing us the scaling, the
# upload and the storage of pixels nobody looks at. At most 5 MB of base64 per image, i.e.
# 3.75 MB of raw bytes.
MAX_EDGE_PX = 1568
MAX_MODEL_PIXELS = 1_230_000
MAX_ENCODED_IMAGE_BYTES = 3_750_000


class MediaRefused(Exception):
    """An attachment cannot be used. `message` is one clear line for the sender."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class MediaLimits:
    max_image_bytes: int = 25_000_000
    max_image_pixels: int = 60_000_000
    max_document_bytes: int = 10_000_000
    max_pdf_pages: int = 100
    max_text_chars: int = 100_000
    max_audio_bytes: int = 25_000_000
    text_types: tuple[str, ...] = (".txt", ".md", ".csv", ".json", ".py")
    keep_images_turns: int = 3
    inbox_quota_bytes: int = 500_000_000
    max_edge_px: int = MAX_EDGE_PX
    max_model_pixels: int = MAX_MODEL_PIXELS
    max_encoded_image_bytes: int = MAX_ENCODED_IMAGE_BYTES

    @classmethod
    def from_config(cls, section: dict[str, Any]) -> MediaLimits:
        return cls(
            max_image_bytes=section["max_image_bytes"],
            max_image_pixels=section["max_image_pixels"],
            max_document_bytes=section["max_document_bytes"],
            max_pdf_pages=section["max_pdf_pages"],
            max_text_chars=section["max_text_chars"],
            max_audio_bytes=section["max_audio_bytes"],
            text_types=tuple(t.lower() if t.startswith(".") else f".{t.lower()}"
                             for t in section["text_types"]),
            keep_images_turns=section["keep_images_turns"],
            inbox_quota_bytes=section["inbox_quota_bytes"],
        )


def megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"

