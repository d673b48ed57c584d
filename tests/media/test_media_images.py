"""Images as the model gets them: the size it uses, upright, one frame, and nothing after the end."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from bot.media.images import fitted, prepare_image
from bot.media.limits import MediaLimits, MediaRefused
from tests.support.media_support import jpeg, png

LIMITS = MediaLimits()
ORIENTATION = 0x0112
# How each EXIF orientation stores an upright picture (the inverse of what undoes it).
STORED_AS = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
             4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE,
             6: Image.Transpose.ROTATE_90, 7: Image.Transpose.TRANSVERSE,
             8: Image.Transpose.ROTATE_270}


def quadrants(width: int, height: int) -> Image.Image:
    """An upright picture whose four quadrants have four different colours."""
    image = Image.new("RGB", (width, height), "red")                      # top left
    image.paste((0, 0, 255), (width // 2, 0, width, height // 2))         # top right
    image.paste((0, 255, 0), (0, height // 2, width // 2, height))        # bottom left
    image.paste((255, 255, 255), (width // 2, height // 2, width, height))
    return image


def with_orientation(upright: Image.Image, orientation: int) -> bytes:
    stored = upright.transpose(STORED_AS[orientation]) if orientation != 1 else upright
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    out = io.BytesIO()
    stored.save(out, "JPEG", quality=95, exif=exif.tobytes())
    return out.getvalue()


def corners(data: bytes) -> list[tuple[int, ...]]:
    image = Image.open(io.BytesIO(data)).convert("RGB")
    w, h = image.size
    points = ((w // 4, h // 4), (3 * w // 4, h // 4), (w // 4, 3 * h // 4), (3 * w // 4, 3 * h // 4))
    return [tuple(round(c / 255) for c in image.getpixel(xy)) for xy in points]


UPRIGHT_CORNERS = [(1, 0, 0), (0, 0, 1), (0, 1, 0), (1, 1, 1)]


def test_a_camera_photo_is_scaled_to_the_size_the_model_uses_and_no_larger():
    out = io.BytesIO()
    Image.linear_gradient("L").resize((4000, 3000)).convert("RGB").save(out, "JPEG")
    prepared = prepare_image(out.getvalue(), LIMITS)
    assert (prepared.width, prepared.height) == fitted(4000, 3000, 1568, LIMITS.max_model_pixels)
    assert prepared.width * prepared.height <= LIMITS.max_model_pixels
    assert Image.open(io.BytesIO(prepared.data)).size == (prepared.width, prepared.height)
    assert (prepared.original_width, prepared.original_height) == (4000, 3000)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_a_small_photo_in_any_exif_orientation_reaches_the_model_upright(orientation):
    prepared = prepare_image(with_orientation(quadrants(400, 300), orientation), LIMITS)
    assert corners(prepared.data) == UPRIGHT_CORNERS
    assert (prepared.width, prepared.height) == (400, 300)
    assert (prepared.original_width, prepared.original_height) == (400, 300)


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_a_large_photo_in_any_exif_orientation_is_scaled_and_upright(orientation):
    prepared = prepare_image(with_orientation(quadrants(3000, 2000), orientation), LIMITS)
    assert corners(prepared.data) == UPRIGHT_CORNERS
    assert (prepared.original_width, prepared.original_height) == (3000, 2000)
    assert prepared.width > prepared.height


def test_a_photo_with_a_video_after_its_end_is_sent_without_the_video():
    photo = jpeg(640, 480)
    motion_photo = photo + b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 50_000
    prepared = prepare_image(motion_photo, LIMITS)
    assert len(prepared.data) < len(photo) + 1000 and prepared.data.endswith(b"\xff\xd9")
    assert (prepared.width, prepared.height) == (640, 480)


def test_an_animated_gif_reaches_the_model_as_its_first_frame():
    frames = [Image.new("RGB", (60, 40), colour) for colour in ("red", "green", "blue")]
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:])
    prepared = prepare_image(out.getvalue(), LIMITS)
    shown = Image.open(io.BytesIO(prepared.data))
    assert getattr(shown, "n_frames", 1) == 1
    assert corners(prepared.data)[0] == (1, 0, 0)


def test_a_palette_image_is_scaled_smoothly_not_by_picking_pixels():
    stripes = Image.new("P", (3000, 2000))
    stripes.putpalette([0, 0, 0, 255, 255, 255])
    stripes.putdata([x % 2 for _ in range(2000) for x in range(3000)])
    out = io.BytesIO()
    stripes.save(out, "PNG")
    prepared = prepare_image(out.getvalue(), LIMITS)
    grey = Image.open(io.BytesIO(prepared.data)).convert("L").getpixel((100, 100))
    assert 90 < grey < 165      # one-pixel stripes average to grey, not black or white


def test_a_cmyk_photo_reaches_the_model_as_rgb():
    out = io.BytesIO()
    Image.new("CMYK", (3000, 2000), (0, 255, 255, 0)).save(out, "JPEG")
    prepared = prepare_image(out.getvalue(), LIMITS)
    assert Image.open(io.BytesIO(prepared.data)).mode == "RGB"


def test_a_truncated_png_is_refused_as_damaged():
    data = png(400, 300)
    with pytest.raises(MediaRefused, match="damaged"):
        prepare_image(data[: len(data) // 2], LIMITS)


def test_an_empty_image_is_refused_as_empty():
    with pytest.raises(MediaRefused, match="empty"):
        prepare_image(b"", LIMITS)
