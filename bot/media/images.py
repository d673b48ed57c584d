"""Images: the type read from the content, the size checked before decoding, scaled with Pillow.

Everything here is synchronous and CPU-bound: callers run it off the event loop, in the worker
processes of `bot.toolbox.offload` (a hostile file then costs a worker, within a time budget, never the
bot). The order of the checks is what keeps a hostile file cheap: byte size, then magic bytes (a
renamed .exe never reaches a decoder), then the pixel count from the header (a 100 000 × 100 000
"decompression bomb" is refused before a single pixel is decoded).

What a photo costs is mostly decoding it, so as little is decoded as possible:
- an image the model can take as it is (small enough, upright, one frame, structurally whole)
  is passed on without decoding or re-encoding it;
- a JPEG is decoded at 1/2, 1/4 or 1/8 scale when that still covers the size the model uses
  (libjpeg scales in the DCT: a 12-megapixel photo never exists in memory at full size);
- other formats are first reduced by a whole factor, and the last fractional step averages
  areas (the cheapest filter that does not alias).
The size the model uses (`MediaLimits.max_edge_px`, `max_model_pixels`) is the size the API
would scale to anyway, so nothing the model would have seen is lost.

Sizes are "as shown": a phone photo taken sideways stores its pixels landscape with an EXIF
Orientation tag; every size reported here is the upright one, and the pixels sent are upright.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from bot.language.phrase import Number, Phrase, size_phrase
from bot.media.limits import MediaLimits, MediaRefused

# kind -> (Pillow format name, media type the Messages API accepts)
FORMATS = {
    "jpeg": ("JPEG", "image/jpeg"),
    "png": ("PNG", "image/png"),
    "gif": ("GIF", "image/gif"),
    "webp": ("WEBP", "image/webp"),
}
SUPPORTED = "JPEG, PNG, GIF or WebP"
# 85 first: text in a photographed receipt stays crisp; lower only when the size demands it.
JPEG_QUALITIES = (85, 75, 60, 45, 30)
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, MemoryError)
ORIENTATION_TAG = 0x0112
SIDEWAYS = (5, 6, 7, 8)        # orientations whose upright picture swaps width and height
# Whole-factor reduction first, then area averaging (Pillow's BOX filter scaled to the ratio)
# for the last step of at most 2×: Pillow's documentation rates it as good as bilinear for
# downscaling, and it takes a third less time than bilinear, half as much as bicubic.
REDUCING_GAP = 2.0

if TYPE_CHECKING:
    from PIL import Image


@dataclass(frozen=True)
class PreparedImage:
    data: bytes = field(repr=False)
    media_type: str
    width: int                 # as sent to the model, upright
    height: int
    original_width: int        # as the sender's screen showed it (upright), before scaling
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


def fitted(width: int, height: int, max_edge: int, max_pixels: int) -> tuple[int, int]:
    """The largest size of the same proportions within both limits (never larger)."""
    scale = min(1.0, max_edge / max(width, height), (max_pixels / (width * height)) ** 0.5)
    if scale >= 1.0:
        return width, height
    size = (min(max_edge, max(1, round(width * scale))), min(max_edge, max(1, round(height * scale))))
    if size[0] * size[1] > max_pixels:      # rounding up took it a hair over
        size = (max(1, int(width * scale)), max(1, int(height * scale)))
    return size


def upright(size: tuple[int, int], orientation: int) -> tuple[int, int]:
    return (size[1], size[0]) if orientation in SIDEWAYS else size


def prepare_image(data: bytes, limits: MediaLimits) -> PreparedImage:
    """The image as the model should get it, or MediaRefused with the reason."""
    from PIL import Image  # imported on the first photo, not at start-up

    if not data:
        raise MediaRefused(Phrase("This image is empty (0 bytes)."))
    if len(data) > limits.max_image_bytes:
        raise MediaRefused(Phrase("This image is too large ({size}; the limit is {limit}).",
                                  size=size_phrase(len(data)),
                                  limit=size_phrase(limits.max_image_bytes)))
    kind = sniff_image(data)
    if kind is None:
        raise MediaRefused(Phrase("This file is not an image I can read: by its content it is "
                                  "not a {formats} image.", formats=SUPPORTED))
    pil_format, media_type = FORMATS[kind]
    try:
        with Image.open(io.BytesIO(data), formats=[pil_format]) as image:
            raw = image.size    # from the header: nothing decoded yet
            if raw[0] * raw[1] > limits.max_image_pixels:
                raise _too_many_pixels(limits, raw)
            orientation = _orientation(image)
            shown = upright(raw, orientation)
            target = fitted(*raw, limits.max_edge_px, limits.max_model_pixels)
            if (target == raw and orientation == 1 and len(data) <= limits.max_encoded_image_bytes
                    and not getattr(image, "is_animated", False) and _whole(data, kind, image)):
                return PreparedImage(data, media_type, *shown, *shown)
            return _redrawn(image, target, orientation, limits, shown)
    except MediaRefused:
        raise
    except Image.DecompressionBombError as exc:   # Pillow's own guard, for headers far past ours
        raise _too_many_pixels(limits) from exc
    except _DECODE_ERRORS as exc:
        raise MediaRefused(Phrase("This image is damaged or incomplete: I could not decode "
                                  "it.")) from exc


def prepare_image_file(path: str, limits: MediaLimits) -> PreparedImage:
    """`prepare_image` in a worker process. The upload comes in as a private file rather than
    through the pool's pipe (for a 5 MB photo the pipe costs more CPU than the scaling), and an
    image passed on unchanged comes back without its bytes: the caller has them."""
    data = Path(path).read_bytes()
    prepared = prepare_image(data, limits)
    return replace(prepared, data=b"") if prepared.data is data else prepared


def _too_many_pixels(limits: MediaLimits, size: tuple[int, int] | None = None) -> MediaRefused:
    limit = Number(round(limits.max_image_pixels / 1_000_000))
    if size:
        return MediaRefused(Phrase("This image is too large to open safely ({width}×{height} "
                                   "pixels; the limit is {limit} megapixels).", width=size[0],
                                   height=size[1], limit=limit))
    return MediaRefused(Phrase("This image is too large to open safely (the limit is {limit} "
                               "megapixels).", limit=limit))


def _orientation(image: Image.Image) -> int:
    """The EXIF Orientation (1 = upright). Read for JPEG and WebP only, where the EXIF comes
    with the header: Pillow finds a PNG's EXIF only by decoding the whole image."""
    if image.format not in ("JPEG", "WEBP"):
        return 1
    try:
        value = image.getexif().get(ORIENTATION_TAG, 1)
    except _DECODE_ERRORS:      # a malformed EXIF block: the picture itself may be fine
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def _whole(data: bytes, kind: str, image: Image.Image) -> bool:
    """A structural check standing in for a full decode of an image passed on as it is: a
    truncated upload fails it (and is then decoded, which reports the damage). Anything after
    the image's end (a phone's "motion photo" video) fails it too, so it is not sent along."""
    if kind == "jpeg":
        return data.endswith(b"\xff\xd9")
    if kind == "gif":
        return data.endswith(b";")
    if kind == "webp":
        return int.from_bytes(data[4:8], "little") + 8 == len(data)
    image.verify()      # PNG: walks the chunks to IEND checking each CRC, decompresses nothing
    return True


def _redrawn(image: Image.Image, target: tuple[int, int], orientation: int, limits: MediaLimits,
             shown: tuple[int, int]) -> PreparedImage:
    """Decoded (at a reduced scale where possible), scaled to `target`, turned upright, encoded."""
    from PIL import Image

    if getattr(image, "is_animated", False):
        image.seek(0)      # the model reads one picture: the first frame
    if image.format == "JPEG" and target != image.size:
        # The requested box keeps the photo's proportions: libjpeg's scale is the smaller of
        # the two ratios, so a square box would never shrink a 4:3 photo.
        image.draft("RGB", target)
    image.load()
    picture = _plain(image)
    if picture.size != target:
        picture = picture.resize(target, Image.Resampling.BOX, reducing_gap=REDUCING_GAP)
    if orientation != 1:
        picture = picture.transpose(_transposes()[orientation])
    data, media_type = _encode(picture, limits.max_encoded_image_bytes)
    return PreparedImage(data, media_type, *picture.size, *shown)


def _plain(image: Image.Image) -> Image.Image:
    """A mode that scales smoothly and encodes as JPEG or PNG: a palette image would be scaled
    by nearest neighbour, and CMYK or 16-bit images are not what the model expects."""
    if image.mode in ("RGB", "L", "RGBA", "LA"):
        return image
    transparent = image.mode in ("PA", "RGBa", "La") or "transparency" in image.info
    return image.convert("RGBA" if transparent else "RGB")


def _encode(image: Image.Image, max_bytes: int) -> tuple[bytes, str]:
    from PIL import Image

    if image.mode in ("RGBA", "LA"):
        out = io.BytesIO()
        image.save(out, "PNG", compress_level=6)   # optimize=True: a few % smaller, 5x slower
        if out.tell() <= max_bytes:
            return out.getvalue(), "image/png"
        rgba = image.convert("RGBA")               # too large as PNG: JPEG on white
        image = Image.new("RGB", image.size, "white")
        image.paste(rgba, mask=rgba.getchannel("A"))
    for quality in JPEG_QUALITIES:
        out = io.BytesIO()
        image.save(out, "JPEG", quality=quality)   # optimize=True: 5 % smaller, 3x slower
        if out.tell() <= max_bytes:
            return out.getvalue(), "image/jpeg"
    raise MediaRefused(Phrase("This image could not be compressed enough for the model."))


def _transposes() -> dict[int, Image.Transpose]:
    from PIL import Image

    t = Image.Transpose
    return {2: t.FLIP_LEFT_RIGHT, 3: t.ROTATE_180, 4: t.FLIP_TOP_BOTTOM, 5: t.TRANSPOSE,
            6: t.ROTATE_270, 7: t.TRANSVERSE, 8: t.ROTATE_90}
