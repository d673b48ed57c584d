"""Files on Slack: downloaded from url_private with the bot token (only from Slack's own host),
under the media limits, typed by content, never for a stranger; voice clips transcribed; files
out through files_upload_v2. The real slack-sdk and agent against the fake Slack, the fake
Anthropic API and a fake speech-to-text service."""

from __future__ import annotations

import json

from tests.fakes.anthropic_server import reply, text, tool_use
from tests.fakes.stt_server import FakeSTT
from tests.support.media_support import EXE, jpeg, png
from tests.support.slack_support import ADA, dm_of

STRANGER = "USTRANGER"


def user_blocks(fake) -> list[dict]:
    return fake.last_request.json["messages"][-1]["content"]


async def test_a_photo_is_downloaded_with_the_bot_token_and_reaches_the_model(bot, slack, fake_anthropic):
    await bot()
    photo = slack.add_file("photo.jpg", jpeg(320, 240), "image/jpeg")
    fake_anthropic.script(text("An orange square."))
    await slack.send("events_api", slack.dm_event(ADA, "what is this?", files=[photo]))
    await slack.wait_until(lambda: "An orange square." in slack.texts_in(dm_of(ADA)))
    assert slack.downloads == [photo["id"]]
    blocks = user_blocks(fake_anthropic)
    assert "image" in [b["type"] for b in blocks] and blocks[-1]["text"].endswith("what is this?")
    for leak in (slack.bot_token, photo["url_private"]):
        assert not any(leak in json.dumps(r.json) for r in fake_anthropic.requests)


async def test_a_program_named_like_a_photo_is_refused_by_its_content(bot, slack, fake_anthropic):
    await bot()
    fake = slack.add_file("cat.jpg", EXE, "image/jpeg")
    fake_anthropic.script(text("No picture."))
    await slack.send("events_api", slack.dm_event(ADA, "look", files=[fake]))
    await slack.wait_until(lambda: "No picture." in slack.texts_in(dm_of(ADA)))
    assert slack.downloads == [fake["id"]]
    assert not any(b.get("type") == "image" for r in fake_anthropic.requests
                   for m in r.json["messages"] for b in m["content"] if isinstance(b, dict))


async def test_a_file_over_the_media_limit_is_explained_and_never_downloaded(bot, slack, fake_anthropic):
    await bot(overrides={"media": {"max_document_bytes": 1000}})
    big = slack.add_file("big.txt", b"x" * 5000, "text/plain")
    fake_anthropic.script(text("Understood."))
    await slack.send("events_api", slack.dm_event(ADA, "read it", files=[big]))
    await slack.wait_until(lambda: "Understood." in slack.texts_in(dm_of(ADA)))
    assert slack.downloads == []
    assert "⚠️ I could not fetch big.txt: it is 5 KB; the limit is 1 KB" in slack.texts_in(dm_of(ADA))
    assert "big.txt" in json.dumps(fake_anthropic.requests[-1].json)


async def test_a_file_url_on_another_host_never_gets_the_token(bot, slack, fake_anthropic):
    await bot()
    elsewhere = {"id": "F9", "name": "x.txt", "mimetype": "text/plain", "size": 3,
                 "url_private": "http://203.0.113.9/steal"}
    fake_anthropic.script(text("Noted."))
    await slack.send("events_api", slack.dm_event(ADA, "here", files=[elsewhere]))
    await slack.wait_until(lambda: "Noted." in slack.texts_in(dm_of(ADA)))
    assert "⚠️ I could not fetch x.txt: it is not stored on Slack" in slack.texts_in(dm_of(ADA))
    assert slack.downloads == []


async def test_a_strangers_file_is_never_downloaded_but_pairing_starts(bot, slack, fake_anthropic):
    await bot()
    photo = slack.add_file("photo.jpg", jpeg(), "image/jpeg")
    await slack.send("events_api", slack.dm_event(STRANGER, "hi, look", files=[photo]))
    await slack.wait_until(lambda: any("pairing code" in t for t in slack.texts_in(dm_of(STRANGER))))
    assert slack.downloads == [] and fake_anthropic.requests == []


async def test_a_voice_clip_is_transcribed_and_answered(bot, slack, fake_anthropic):
    async with FakeSTT(transcript="what's the weather tomorrow") as stt:
        await bot(overrides={"media": {"transcription": {"base_url": stt.base_url,
                                                         "model": "whisper-1"}}})
        clip = slack.add_file("audio_message.m4a", b"\x00\x00\x00\x1cftypM4A clip", "audio/mp4",
                              subtype="slack_audio")
        fake_anthropic.script(text("Sunny."))
        await slack.send("events_api", slack.dm_event(ADA, "", files=[clip]))
        await slack.wait_until(lambda: "Sunny." in slack.texts_in(dm_of(ADA)))
        assert stt.requests[0].data == b"\x00\x00\x00\x1cftypM4A clip"
        assert user_blocks(fake_anthropic)[-1]["text"] == "what's the weather tomorrow"
        assert any("what's the weather tomorrow" in t for t in slack.texts_in(dm_of(ADA)))


async def test_send_file_uploads_through_files_upload_v2_into_the_conversation(bot, slack, fake_anthropic):
    app, _ = await bot(senders={f"slack:{ADA}": "full"})
    (app.config.workspace / "chart.png").write_bytes(png(40, 30))
    fake_anthropic.script(reply(tool_use("send_file", {"path": "chart.png", "caption": "Chart"})),
                          text("Sent."))
    await slack.send("events_api", slack.dm_event(ADA, "send me the chart"))
    await slack.wait_until(lambda: "Sent." in slack.texts_in(dm_of(ADA)))
    (upload,) = slack.uploads.values()
    assert upload["data"] == png(40, 30) and upload["filename"] == "chart.png"
    assert upload["channel"] == dm_of(ADA) and upload["comment"] == "Chart"
