"""Images: the type read from the content, the size checked before decoding, scaled with Pillow.

Everything here is synchronous and CPU-bound: callers run it off the event loop
(`asyncio.to_thread`). The order of the checks is what keeps a hostile file cheap: byte size,
then magic bytes (a renamed .exe never reaches a decoder), then the pixel count from the header
(a 100 000 × 100 000 "decompression bomb" is refused before a single pixel is decoded), and only
then the decode, which for JPEG happens at a reduced scale when the photo will be shrunk anyway.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.media.limits import MediaLimits, MediaRefused, megabytes

# kind -> (Pillow format name, media type the Messages API accepts)
FORMATS = {
    "jpeg": ("JPEG", "image/jpeg"),
    "png": ("PNG", "image/png"),
    "gif": ("GIF", "image/gif"),
    "webp": ("WEBP", "image/webp"),
}
SUPPORTED = "JPEG, PNG, GIF or WebP"
JPEG_QUALITIES = (85, 75, 60, 45, 30)
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError)

if TYPE_CHECKING:
    from PIL import Image


@dataclass(frozen=True)
class PreparedImage:
    data: bytes = field(repr=False)
    media_type: str
    width: int
    height: int
    original_width: int
    original_height: int

    @property
    def scaled(self) -> bool:
        return (self.width, self.height) != (self.original_width, self.original_height)


def sniff_image(data: bytes) -> str | None:
    """The image kind by magic bytes ("jpeg", "png", "gif", "webp"), or None."""
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def prepare_image(data: bytes, limits: MediaLimits) -> PreparedImage:
    """The image as the model should get it, or MediaRefused with the reason."""
    from PIL import Image  # imported on the first photo, not at start-up

    if len(data) > limits.max_image_bytes:
        raise MediaRefused(f"This image is too large ({megabytes(len(data))}; the limit is "
                           f"{megabytes(limits.max_image_bytes)}).")
    kind = sniff_image(data)
    if kind is None:
        raise MediaRefused(f"This file is not an image I can read: by its content it is not a "
                           f"{SUPPORTED} image.")
    pil_format, media_type = FORMATS[kind]
    try:
        with Image.open(io.BytesIO(data), formats=[pil_format]) as image:
            width, height = image.size    # from the header: nothing decoded yet
            if width * height > limits.max_image_pixels:
                raise MediaRefused(
                    f"This image is too large to open safely ({width}×{height} pixels; the "
                    f"limit is {limits.max_image_pixels / 1_000_000:.0f} megapixels).")
            if max(width, height) <= limits.max_edge_px and len(data) <= limits.max_encoded_image_bytes:
                image.load()   # decodes in full: the model is never sent a broken image
                return PreparedImage(data, media_type, width, height, width, height)
            return _scaled(image, limits, width, height)
    except MediaRefused:
        raise
    except Image.DecompressionBombError as exc:   # Pillow's own guard, for headers far past ours
        raise MediaRefused(f"This image is too large to open safely (the limit is "
                           f"{limits.max_image_pixels / 1_000_000:.0f} megapixels).") from exc
    except _DECODE_ERRORS as exc:
        raise MediaRefused("This image is damaged or incomplete: I could not decode it.") from exc


def _scaled(image: Image.Image, limits: MediaLimits, width: int, height: int) -> PreparedImage:
    """Shrunk to the long edge the model uses, upright, re-encoded under the size limit."""
    from PIL import Image, ImageOps

    if getattr(image, "is_animated", False):
        image.seek(0)      # an animation too large to pass whole: its first frame
    edge = limits.max_edge_px
    if image.format == "JPEG":
        # libjpeg decodes at 1/2, 1/4 or 1/8 scale when the result still covers `edge`: a
        # 24-megapixel photo never exists in memory at full size, and decoding costs a quarter.
        # The requested box must have the photo's proportions: libjpeg's scale is the smaller of
        # the two ratios, so a square box would never shrink a 4:3 photo.
        ratio = edge / max(width, height)
        image.draft("RGB", (max(1, round(width * ratio)), max(1, round(height * ratio))))
    # Keeps the aspect ratio. Bicubic: within a hair of Lanczos at this ratio, a third faster.
    # reducing_gap=None: the draft above already did the coarse step (a second draft would undo it).
    image.thumbnail((edge, edge), Image.Resampling.BICUBIC, reducing_gap=None)
    ImageOps.exif_transpose(image, in_place=True)   # upright, as the phone showed it
    data, media_type = _encode(image, limits.max_encoded_image_bytes)
    with Image.open(io.BytesIO(data)) as check:
        final_width, final_height = check.size
    return PreparedImage(data, media_type, final_width, final_height, width, height)


def _encode(image: Image.Image, max_bytes: int) -> tuple[bytes, str]:
    from PIL import Image

    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        out = io.BytesIO()
        image.save(out, "PNG", optimize=True)
        if out.tell() <= max_bytes:
            return out.getvalue(), "image/png"
        flat = Image.new("RGB", image.size, "white")   # too large as PNG: JPEG on white
        flat.paste(image.convert("RGBA"), mask=image.convert("RGBA").getchannel("A"))
        image = flat
    rgb = image if image.mode in ("RGB", "L") else image.convert("RGB")
    for quality in JPEG_QUALITIES:
        out = io.BytesIO()
        rgb.save(out, "JPEG", quality=quality)   # optimize=True: 5 % smaller, 3x slower
        if out.tell() <= max_bytes:
            return out.getvalue(), "image/jpeg"
    raise MediaRefused("This image could not be compressed enough for the model.")
