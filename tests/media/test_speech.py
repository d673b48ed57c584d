"""Speech out, piece by piece: what is said of an answer, its language, the real espeak-ng, the
OpenAI-compatible engine against the fake service, and the OGG/Opus encoding read back by
libsndfile."""

from __future__ import annotations

import io

import pytest
import soundfile

from bot.media.speech import encode
from bot.media.speech.engine import Speaker, SpeechError
from bot.media.speech.espeak import EspeakEngine
from bot.media.speech.http import HttpSpeechEngine
from bot.media.speech.spoken import guess_language, spoken_text
from tests.fakes.tts_server import FakeTTS, tone
from tests.support.voice_support import assert_voice_message


def test_code_blocks_tables_and_urls_are_named_in_the_answers_language():
    answer = ("## Steps\n- run it:\n```sh\nmake run\n```\n| k | v |\n|---|---|\n"
              "Read https://example.org/x.\n")
    assert spoken_text(answer, "en", 1000) == (
        "Steps\nrun it:\nCode, see the text.\nA table, see the text.\nRead a link.")
    assert spoken_text("Guarda https://x.it e:\n```\nls\n```", "it", 1000) == (
        "Guarda un link e:\nCodice, vedi il testo.")
    assert spoken_text("Mira `ls -la` y https://x.es", "es", 1000) == "Mira ls -la y un enlace"


def test_an_unclosed_code_block_is_code_to_the_end():
    assert spoken_text("Here:\n```\nline\nline", "en", 1000) == "Here:\nCode, see the text."


def test_a_long_answer_is_cut_at_the_last_sentence_that_fits():
    answer = "First sentence here. Second one is longer than that. " * 40
    said = spoken_text(answer, "en", 120)
    assert len(said) <= 120 and said.endswith(".") and answer.startswith(said)


def test_an_answer_of_one_endless_word_is_cut_at_the_limit():
    assert spoken_text("a" * 5000, "en", 100) == "a" * 100


@pytest.mark.parametrize(("answer", "language"), [
    ("Ciao, la riunione è domani e non dimenticare il codice.", "it"),
    ("Hola, la reunión es mañana y no olvides el código para el equipo.", "es"),
    ("Hello, the meeting is tomorrow and do not forget the code.", "en"),
    ("12345 ✓", "en"),
])
def test_the_language_of_an_answer_is_recognised_from_its_common_words(answer, language):
    assert guess_language(answer) == language


@pytest.mark.parametrize(("answer", "language"), [
    ("Ciao! Come stai?", "it"),
    ("Certo, ti aiuto volentieri.", "it"),
    ("La capitale d'Italia è Roma.", "it"),
    ("Hola, ¿cómo estás?", "es"),
    ("Claro, te ayudo con gusto.", "es"),
    ("¡Perfecto!", "es"),
    ("Hello! How are you?", "en"),
    ("Sure, I'd be glad to help.", "en"),
    ("The capital of Italy is Rome.", "en"),
    ("I need a pen.", "en"),
    ("Done! I wrote milk to notes.txt.", "en"),
])
def test_a_short_answer_is_recognised_from_its_words_accents_and_marks(answer, language):
    assert guess_language(answer, default="none") == language


@pytest.mark.parametrize("answer", ["OK", "Roma 👍", "A table.", "12:30"])
def test_an_answer_that_does_not_say_its_language_is_left_to_the_default(answer):
    assert guess_language(answer, default="none") == "none"


async def test_espeak_reads_text_that_looks_like_an_option_as_text():
    engine = EspeakEngine(voices={}, timeout=20)
    wav = await engine.synthesize("--version -v xx", "en")
    info = soundfile.info(io.BytesIO(wav))
    assert info.format == "WAV" and info.duration > 0.5


async def test_espeak_not_installed_is_a_clear_error():
    engine = EspeakEngine(voices={}, timeout=5, binary="espeak-ng-not-here")
    assert not engine.available
    with pytest.raises(SpeechError, match="espeak-ng is not installed"):
        await engine.synthesize("hello", "en")


async def test_espeak_audio_becomes_a_24_khz_ogg_opus_voice_message():
    voice = await Speaker(EspeakEngine(voices={"it": "it"}, timeout=20)).speak(
        "Questa è una prova della voce italiana.", "it")
    info = assert_voice_message(voice.data, voice.duration)
    assert info.samplerate == 24000 and 1.0 < info.duration < 8


def test_ogg_opus_passes_through_untouched_and_unreadable_bytes_are_refused():
    ogg = tone(0.5)
    assert encode.to_ogg_opus(ogg)[0] == ogg
    with pytest.raises(encode.AudioError):
        encode.to_ogg_opus(b"<html>not audio</html>")


async def test_the_speech_service_refusing_the_key_never_shows_the_key():
    async with FakeTTS() as tts:
        tts.fail_with = 401
        engine = HttpSpeechEngine(base_url=f"{tts.base_url}/v1", model="tts-1", voice="",
                                  voices={}, timeout=5, key="sk-secret-tts")
        with pytest.raises(SpeechError) as caught:
            await engine.synthesize("hello", "en")
    assert "MYCLAW_TTS_API_KEY" in caught.value.message
    assert "sk-secret-tts" not in caught.value.message
    assert tts.requests[0].json == {"model": "tts-1", "input": "hello", "voice": "alloy",
                                    "response_format": "opus"}


async def test_a_speech_service_that_cannot_be_reached_is_a_clear_error():
    engine = HttpSpeechEngine(base_url="http://127.0.0.1:9", model="tts-1", voice="alloy",
                              voices={}, timeout=5, key="")
    with pytest.raises(SpeechError, match="unreachable"):
        await engine.synthesize("hello", "en")
