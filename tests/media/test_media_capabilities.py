"""What a model cannot see degrades visibly, on both providers: a photo sent to a model
without vision becomes a placeholder line and the sender is told once; a PDF sent to a model
that cannot read PDFs becomes its extracted text, wrapped as file data."""

from __future__ import annotations

import json

from bot.core.events import DocumentPart, ImagePart
from bot.llm.degrade import IMAGE_PLACEHOLDER, NO_PDFS, NO_VISION
from tests.fakes.anthropic_server import text
from tests.media.test_media_agent import notices, send
from tests.support.media_support import jpeg
from tests.support.providers import limited, on_both_providers

provider_name = on_both_providers()


def sent(fake) -> str:
    return json.dumps(fake.last_request.json)


def text_pdf(words: str) -> bytes:
    """A one-page PDF whose page shows `words` (so pypdf has text to extract)."""
    import io

    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    page = writer.add_blank_page(width=300, height=100)
    font = DictionaryObject({NameObject("/Type"): NameObject("/Font"),
                             NameObject("/Subtype"): NameObject("/Type1"),
                             NameObject("/BaseFont"): NameObject("/Helvetica")})
    page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject(
        {NameObject("/F1"): writer._add_object(font)})})
    stream = DecodedStreamObject()
    stream.set_data(f"BT /F1 12 Tf 10 50 Td ({words}) Tj ET".encode())
    page[NameObject("/Contents")] = writer._add_object(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


async def test_a_photo_to_a_model_without_vision_is_a_placeholder_and_said_once(
        app_factory, fake_model, provider_name):
    app = await app_factory(limited(provider_name, fake_model, vision=False))
    fake_model.script(text("I cannot see it."), text("Still here."))
    first = await send(app, "what is this?", ImagePart(jpeg(320, 240), "image/jpeg", "pic.jpg"))
    body = sent(fake_model)
    assert IMAGE_PLACEHOLDER in body and "what is this?" in body
    assert '"image_url"' not in body and '"type": "image"' not in body
    assert notices(first) == [NO_VISION.format(model="limited")]
    second = await send(app, "and now?")     # the photo is still in the history: not said again
    assert notices(second) == [] and IMAGE_PLACEHOLDER in sent(fake_model)


async def test_a_pdf_to_a_model_without_pdfs_is_its_text_marked_as_file_data(
        app_factory, fake_model, provider_name):
    app = await app_factory(limited(provider_name, fake_model, pdfs=False))
    fake_model.script(text("It says hello."))
    sink = await send(app, "summarise", DocumentPart(text_pdf("Quarterly figures are up"),
                                                      "report.pdf", "application/pdf"))
    body = sent(fake_model)
    assert "Quarterly figures are up" in body and "<untrusted-" in body
    assert '"type": "document"' not in body and '"file_data"' not in body
    assert notices(sink) == [NO_PDFS.format(model="limited")]
