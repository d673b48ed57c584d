"""What voice replies keep in the store, on SQLite and PostgreSQL: each sender's /voice choice
(read back by another process), the characters a priced engine spoke and their cost (shown in
/usage), and the once-a-day notice that voice is paused over budget."""

from __future__ import annotations

from bot.core.events import Notice, SpeechOut
from tests.fakes.anthropic_server import reply, text
from tests.fakes.tts_server import FakeTTS
from tests.support.pg_support import on_both_backends
from tests.support.voice_support import ADA, SENDERS, say

backend_name = on_both_backends()


async def test_the_choice_is_stored_and_read_back_by_a_new_process(app_factory, fake_anthropic):
    first = await app_factory({"senders": SENDERS})
    await say(first, "/voice off")
    second = await app_factory({"senders": SENDERS})
    assert await second.agent.voice.mode_of(ADA) == "off"
    assert await second.agent.voice.mode_of("telegram:6") == "auto"
    assert "Usage: /voice on | off | auto" in (await say(second, "/voice loud")).of(Notice)[0].text
    assert await second.agent.voice.mode_of(ADA) == "off"


async def test_speech_is_priced_per_character_and_shown_in_usage(app_factory, fake_anthropic):
    async with FakeTTS() as tts:
        app = await app_factory({"senders": SENDERS, "media": {"speech": {
            "base_url": tts.base_url, "model": "tts-1"}}}, env={"MYCLAW_TTS_API_KEY": "tts-key"})
        await say(app, "/voice on")
        fake_anthropic.script(text("Twenty characters!!!"))
        await say(app, "x")
        assert tts.requests[0].authorization == "Bearer tts-key"
        row = await app.services.store.fetchone(
            "SELECT characters, cost FROM usage WHERE model = 'tts-1'")
        assert row["characters"] == 20 and abs(row["cost"] - 20 * 15.0 / 1e6) < 1e-12
        usage = (await say(app, "/usage")).of(Notice)[0].text
        assert "voice today: 20 characters spoken" in usage


async def test_over_budget_the_text_is_sent_and_voice_is_paused_once(app_factory, fake_anthropic):
    async with FakeTTS() as tts:
        app = await app_factory({"senders": SENDERS, "budgets": {"sender_daily": 0.0000001},
                                 "media": {"speech": {"base_url": tts.base_url}}})
        await say(app, "/voice on")
        fake_anthropic.script(reply(text("Costly answer."), usage={"output_tokens": 1000}))
        sink = await say(app, "x")
        assert sink.text == "Costly answer." and sink.of(SpeechOut) == [] and tts.requests == []
        assert any("Voice replies are paused" in n.text for n in sink.of(Notice))
        assert not await app.agent.voice._once.first(f"voice-paused\x1f{ADA}\x1f"
                                                      f"{app.services.spend.period().day}")
