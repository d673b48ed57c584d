"""Test media made in-test with Pillow and pypdf (no binary fixtures)."""

from __future__ import annotations

import functools
import io
import os

from PIL import Image
from pypdf import PdfWriter


def jpeg(width: int = 64, height: int = 48, color: str = "orange", quality: int = 90) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, "JPEG", quality=quality)
    return out.getvalue()


def sideways_jpeg(width: int = 640, height: int = 480) -> bytes:
    """A phone photo taken upright: stored `width`×`height` (landscape) with an EXIF Orientation
    of 6 (turn 90° clockwise to show it), so it is shown `height`×`width`."""
    image = Image.new("RGB", (width, height), "orange")
    exif = image.getexif()
    exif[0x0112] = 6
    out = io.BytesIO()
    image.save(out, "JPEG", exif=exif.tobytes())
    return out.getvalue()


def png(width: int = 64, height: int = 48, mode: str = "RGBA") -> bytes:
    out = io.BytesIO()
    Image.new(mode, (width, height), (10, 200, 30, 128) if mode == "RGBA" else "green").save(out, "PNG")
    return out.getvalue()


@functools.lru_cache(maxsize=4)
def noise_jpeg(min_bytes: int) -> bytes:
    """A photo-like 4:3 JPEG (random pixels compress badly) of at least `min_bytes`, and not
    much more (about 1.4 bytes per pixel at this quality)."""
    width = int((min_bytes / 1.45 * 4 / 3) ** 0.5)
    while True:
        height = width * 3 // 4
        image = Image.frombytes("RGB", (width, height), os.urandom(width * height * 3))
        out = io.BytesIO()
        image.save(out, "JPEG", quality=97)
        if out.tell() >= min_bytes:
            return out.getvalue()
        width = int(width * 1.02)


def pdf(pages: int = 2) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=200, height=200)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


# What a Windows program starts with: a renamed .exe must be refused by its content.
EXE = b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00" + b"\x00" * 200


def bomb_png(width: int = 30_000, height: int = 30_000) -> bytes:
    """A tiny PNG whose header claims a huge canvas (decoding it would need gigabytes)."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = zlib.compress(b"\x00" * (1 + width * 3) * 4)  # a few rows; the rest is never read
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")
