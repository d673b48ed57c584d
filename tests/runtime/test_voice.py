"""Voice replies through the real agent: /voice on|off|auto, the real espeak-ng and the fake
OpenAI-compatible speech service, the audio checked with libsndfile for what it claims, the
text always first and whole. (What is stored is checked on both backends in
test_voice_store.py.)"""

from __future__ import annotations

from bot.core.approval_cards import ApprovalNeeded
from bot.core.events import CollectingSink, Done, IncomingMessage, Notice, SpeechOut
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.stt_server import FakeSTT
from tests.fakes.tts_server import FakeTTS
from tests.support.runtime_tools import Writer
from tests.support.voice_support import SENDERS, assert_voice_message, say, voice_of

ADA = "telegram:5"


async def test_voice_is_auto_by_default_and_a_typed_message_gets_text_only(app_factory, fake_anthropic):
    app = await app_factory({"senders": SENDERS})
    fake_anthropic.script(text("Hello there."))
    sink = await say(app, "hi")
    assert sink.text == "Hello there." and sink.of(SpeechOut) == []
    assert "Voice replies: auto" in (await say(app, "/voice")).of(Notice)[0].text


async def test_voice_on_sends_the_text_then_an_espeak_voice_message(app_factory, fake_anthropic):
    app = await app_factory({"senders": SENDERS})
    assert "Voice replies: on" in (await say(app, "/voice on")).of(Notice)[0].text
    fake_anthropic.script(text("The meeting is at nine tomorrow, in the small room."))
    sink = await say(app, "when is the meeting?")
    kinds = [type(e) for e in sink.events if isinstance(e, Done | SpeechOut)]
    assert kinds == [Done, SpeechOut]
    assert sink.text == "The meeting is at nine tomorrow, in the small room."
    info = voice_of(sink.of(SpeechOut)[0])
    assert 1.5 < info.duration < 10


async def test_auto_answers_a_voice_note_by_voice_and_off_never_does(app_factory, fake_anthropic):
    async with FakeSTT(transcript="what time is it") as stt:
        app = await app_factory({"senders": SENDERS, "media": {
            "transcription": {"base_url": stt.base_url, "model": "whisper-1"}}})
        fake_anthropic.script(text("It is noon."), text("Still noon."))
        spoken = await say(app, voice_note=b"OggS-voice")
        assert spoken.text == "It is noon." and len(spoken.of(SpeechOut)) == 1
        await say(app, "/voice off")
        silent = await say(app, voice_note=b"OggS-voice")
        assert silent.text == "Still noon." and silent.of(SpeechOut) == []


async def test_a_five_thousand_character_answer_is_written_whole_and_its_start_spoken(
        app_factory, fake_anthropic):
    async with FakeTTS() as tts:
        app = await app_factory({"senders": SENDERS, "media": {"speech": {
            "base_url": tts.base_url, "max_chars": 1000}}})
        await say(app, "/voice on")
        answer = " ".join(f"Sentence number {i} says a little more." for i in range(130))[:5000]
        fake_anthropic.script(text(answer))
        sink = await say(app, "tell me everything")
        assert sink.text == answer and len(answer) == 5000
        said = tts.requests[0].json["input"]
        assert len(said) <= 1000 and said.endswith(".") and answer.startswith(said)
        voice_of(sink.of(SpeechOut)[0])


async def test_an_answer_that_is_only_code_is_spoken_as_see_the_text(app_factory, fake_anthropic):
    async with FakeTTS() as tts:
        app = await app_factory({"senders": SENDERS, "media": {"speech": {"base_url": tts.base_url}}})
        await say(app, "/voice on")
        code = "```python\nprint('hello')\nfor i in range(3):\n    print(i)\n```"
        fake_anthropic.script(text(code))
        sink = await say(app, "write a loop")
        assert sink.text == code
        assert tts.requests[0].json["input"] == "Code, see the text."


async def test_links_and_tables_are_named_not_read_out(app_factory, fake_anthropic):
    async with FakeTTS() as tts:
        app = await app_factory({"senders": SENDERS, "media": {"speech": {"base_url": tts.base_url}}})
        await say(app, "/voice on")
        fake_anthropic.script(text("See https://example.org/a?b=c and [the docs](https://d.example).\n"
                                   "| a | b |\n|---|---|\n| 1 | 2 |\nThat is **all**."))
        await say(app, "links?")
        assert tts.requests[0].json["input"] == (
            "See a link and the docs.\nA table, see the text.\nThat is all.")


async def test_the_speech_service_down_still_sends_the_text_and_says_so_once(app_factory, fake_anthropic):
    async with FakeTTS() as tts:
        tts.fail_with = 503
        app = await app_factory({"senders": SENDERS, "media": {"speech": {"base_url": tts.base_url}}})
        await say(app, "/voice on")
        fake_anthropic.script(text("First answer."), text("Second answer."))
        first, second = await say(app, "one"), await say(app, "two")
        assert (first.text, second.text) == ("First answer.", "Second answer.")
        assert first.of(SpeechOut) == second.of(SpeechOut) == []
        notices = [n.text for n in first.of(Notice) + second.of(Notice)]
        assert len(notices) == 1 and "HTTP 503" in notices[0] and len(tts.requests) == 2


async def test_a_slow_speech_service_never_holds_the_text_back(app_factory, fake_anthropic):
    async with FakeTTS() as tts:
        tts.hold = True
        app = await app_factory({"senders": SENDERS, "media": {"speech": {"base_url": tts.base_url}}})
        await say(app, "/voice on")
        fake_anthropic.script(text("Right away."))
        sink = CollectingSink()
        await app.agent.handle(IncomingMessage(sender=ADA, chat="c", text="quick",
                                               channel="telegram"), sink)
        assert sink.text == "Right away." and sink.of(SpeechOut) == []   # the service still holds
        tts.release()
        await app.agent.voice.settled()
        assert len(sink.of(SpeechOut)) == 1


async def test_a_service_sending_wav_is_reencoded_as_ogg_opus(app_factory, fake_anthropic):
    async with FakeTTS() as tts:
        tts.sends = "wav"
        app = await app_factory({"senders": SENDERS, "media": {"speech": {"base_url": tts.base_url}}})
        await say(app, "/voice on")
        fake_anthropic.script(text("Encoded again."))
        voice_of((await say(app, "x")).of(SpeechOut)[0])


async def test_an_italian_answer_gets_the_italian_voice(app_factory, fake_anthropic):
    async with FakeTTS() as tts:
        app = await app_factory({"senders": SENDERS, "media": {"speech": {
            "base_url": tts.base_url, "voice": "alloy", "voices": {"it": "voce-italiana"}}}})
        await say(app, "/voice on")
        fake_anthropic.script(text("Ciao! La riunione è domani alle nove, non dimenticare il "
                                   "codice: ```x = 1```"), text("Hello, the meeting is at nine."))
        await say(app, "quando è la riunione?")
        await say(app, "when is the meeting?")
        assert [r.json["voice"] for r in tts.requests] == ["voce-italiana", "alloy"]
        assert "Codice, vedi il testo." in tts.requests[0].json["input"]


async def test_espeak_speaks_italian_with_its_italian_voice(app_factory):
    app = await app_factory({"senders": SENDERS})
    engine = app.agent.voice.speaker().engine
    assert engine.name == "espeak-ng" and engine.available and engine.priced_model == ""
    assert (engine.voice_for("it"), engine.voice_for("es"), engine.voice_for("en")) == (
        "it", "es", "en-us")
    voice = await app.agent.voice.speaker().speak("Buongiorno, come stai?", "it")
    assert_voice_message(voice.data, voice.duration)


async def test_the_answer_after_an_approval_is_spoken_too_with_voice_on(app_factory, fake_anthropic):
    app = await app_factory({"senders": SENDERS})
    app.services.registry.register(Writer(), "tests")
    await say(app, "/voice on")
    fake_anthropic.script(reply(text("I'll write it."), tool_use("writer", {"note": "milk"})),
                          text("Written down: milk."))
    asked = await say(app, "note milk")
    assert asked.of(SpeechOut) == []                 # waiting for the tap: nothing final to say
    (view,) = [e.approval for e in asked.of(ApprovalNeeded)]
    resumed = CollectingSink()
    assert app.agent.resume_approval(await app.agent.resolve_approval(view.id, ADA, "approve"),
                                     resumed)
    await app.agent.queue.drain(5)
    await app.agent.voice.settled()
    assert resumed.text == "Written down: milk." and len(resumed.of(SpeechOut)) == 1
