"""Any bytes in, valid text out, through WhatsApp: seeded text with lone surrogates, NUL, random
bytes, right-to-left and combining marks, in signed webhook deliveries whose JSON carries lone
surrogates as `\\ud800` escapes (what `json.loads` hands back as lone surrogates) — text bodies,
a photo's caption, a document's caption and file name, and the titles and ids of interactive
replies. Every message is answered, the model and the Graph API receive valid text, and both
stores hold only valid text."""

from __future__ import annotations

import json
import random

from bot.core.events import REPAIRED_NOTICE
from tests.channels.whatsapp.conftest import ADA
from tests.fakes.whatsapp_server import FakeWhatsApp
from tests.support.fuzz_text import (
    fuzz_seed,
    invalid_strings,
    nasty_file_name,
    nasty_text,
    stored_text_is_valid,
)
from tests.support.media_support import png
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()

MESSAGES = 4


def answers(wa: FakeWhatsApp) -> list[str]:
    return [t for t in wa.texts_to(ADA) if t.startswith("ok: ")]


async def test_fuzzed_bodies_captions_and_file_names_are_answered_and_stored_as_valid_text(
        bot, wa, fake_anthropic):
    seed = fuzz_seed()
    rng = random.Random(seed)
    started = await bot({f"whatsapp:{ADA}": "full"})
    for _ in range(MESSAGES):
        delivery = started.driver.message(ADA, "text", {"body": nasty_text(rng)},
                                          name=nasty_text(rng, 2))
        body = json.dumps(delivery).encode()
        assert b"\\udcff" in body   # the lone surrogate travels as an escape, as JSON allows
        wa.opened(ADA)
        assert await started.driver.post(body) == 200
    assert await started.driver.media(ADA, "image", png(), "image/png",
                                      caption=nasty_text(rng)) == 200
    assert await started.driver.media(ADA, "document", b"notes \xff\xfe", "text/plain",
                                      filename=nasty_file_name(rng),
                                      caption=nasty_text(rng)) == 200
    answered = MESSAGES + 2
    await wa.wait_until(lambda: len(answers(wa)) >= answered, timeout=60)
    failure = f"(FUZZ_SEED={seed})"
    texts = wa.texts_to(ADA)
    assert len(fake_anthropic.requests) >= answered, failure
    assert all(not invalid_strings(r.json) for r in fake_anthropic.requests), failure
    assert wa.sent and all(not invalid_strings(m.body) for m in wa.sent), failure
    assert len(answers(wa)) == answered, f"{failure} {texts}"
    assert texts.count(REPAIRED_NOTICE) == answered, f"{failure} {texts}"   # each was repaired
    document = fake_anthropic.requests[-1].json["messages"][-1]["content"]
    assert any("notes" in str(block) for block in document), f"{failure} {document}"   # read
    assert ".txt" in document[0]["text"] and "\ufffd" in document[0]["text"], failure   # its name
    assert await stored_text_is_valid(started.app.services.store) == [], failure


async def test_fuzzed_interactive_reply_titles_and_ids_are_answered_with_valid_text(
        bot, wa, fake_anthropic):
    seed = fuzz_seed()
    rng = random.Random(seed)
    started = await bot({f"whatsapp:{ADA}": "full"})
    foreign = "wamid.foreign"
    assert await started.driver.tap(ADA, nasty_text(rng, 3), foreign,
                                    title=nasty_text(rng, 3)) == 200
    refusal = await wa.wait_for(lambda m: m.to == ADA and m.reply_to == foreign)
    # A command button whose title came back mangled still runs its command (the id is ours).
    assert await started.driver.tap(ADA, "c:/whoami", "wamid.card", title=nasty_text(rng, 3)) == 200
    await wa.wait_until(lambda: len(wa.to(ADA)) >= 2)
    failure = f"(FUZZ_SEED={seed})"
    assert refusal.text and not invalid_strings(refusal.body), failure
    assert all(not invalid_strings(m.body) for m in wa.sent), failure
    assert fake_anthropic.requests == [], failure   # neither tap is a message for the model
    assert await stored_text_is_valid(started.app.services.store) == [], failure
