"""Any bytes in, valid text out, through Telegram: seeded text with lone surrogates, NUL, random
bytes, right-to-left and combining marks, sent as messages, captions and file names through the
real python-telegram-bot and the fake Bot API — every one is answered, the model and the
platform receive valid text, and both stores hold only valid text."""

from __future__ import annotations

import random

from bot.core.events import REPAIRED_NOTICE
from channels.telegram import TelegramChannel
from tests.fakes.telegram_server import channel_overrides
from tests.support.fuzz_text import (
    fuzz_seed,
    invalid_strings,
    nasty_text,
    stored_text_is_valid,
)
from tests.support.pg_support import on_both_backends
from tests.support.telegram_support import FAST

backend_name = on_both_backends()


def answers(tg) -> list[str]:
    return [c.params["text"] for c in tg.of("sendMessage") if c.params["text"].startswith("ok: ")]

ADA = 4242
MESSAGES = 6


async def test_fuzzed_text_captions_and_file_names_are_answered_and_stored_as_valid_text(
        app_factory, tg, fake_anthropic):
    seed = fuzz_seed()
    rng = random.Random(seed)
    app = await app_factory({"senders": {f"telegram:{ADA}": "full"}, **channel_overrides(tg)},
                            env={"TELEGRAM_BOT_TOKEN": tg.token})
    channel = TelegramChannel(app.config, app.agent, settings=FAST)
    await channel.start()
    try:
        for _ in range(MESSAGES):
            tg.private_message(ADA, nasty_text(rng))
        document = {**tg.add_file(b"notes \xff\xfe", "documents/notes.txt"),
                    "file_name": nasty_text(rng, 4) + ".txt", "mime_type": "text/plain"}
        tg.private_message(ADA, None, document=document, caption=nasty_text(rng))
        answered = MESSAGES + 1
        await tg.wait_until(lambda: len(answers(tg)) >= answered, timeout=60)
    finally:
        await channel.stop()
    failure = f"(FUZZ_SEED={seed})"
    assert len(fake_anthropic.requests) >= answered, failure
    assert all(not invalid_strings(r.json) for r in fake_anthropic.requests), failure
    assert all(not invalid_strings(c.params) for c in tg.of("sendMessage")), failure
    texts = [c.params["text"] for c in tg.of("sendMessage")]
    assert len(answers(tg)) == answered, f"{failure} {texts}"
    assert texts.count(REPAIRED_NOTICE) == answered, f"{failure} {texts}"   # each was repaired
    assert await stored_text_is_valid(app.services.store) == [], failure
