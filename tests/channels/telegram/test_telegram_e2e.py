"""The Telegram channel end to end: the real App and agent, the real python-telegram-bot talking
to a fake Bot API, and a fake Anthropic API, all on 127.0.0.1."""

from __future__ import annotations

import re

import pytest

from channels.telegram import TelegramChannel
from tests.fakes.anthropic_server import error, last_user_text, reply, text, tool_use
from tests.fakes.telegram_server import FakeTelegram, channel_overrides, handled
from tests.support.telegram_support import FAST

ADA, BOB, STRANGER = 4242, 4343, 7777
GROUP, OTHER_GROUP = -100123, -100999
SENDERS = {f"telegram:{ADA}": "supervised", f"telegram:{BOB}": "full", "unknown": "pairing"}


@pytest.fixture
async def bot(app_factory, tg):
    """`await bot(**telegram_overrides)` → (app, channel) with the channel started in polling mode."""
    started: list[TelegramChannel] = []

    async def start(senders: dict | None = None, agent: dict | None = None, **telegram):
        overrides = {"senders": senders or SENDERS, "agent": agent or {},
                     **channel_overrides(tg, groups=[GROUP], **telegram)}
        app = await app_factory(overrides, env={"TELEGRAM_BOT_TOKEN": tg.token})
        channel = TelegramChannel(app.config, app.agent, settings=FAST)
        await channel.start()
        started.append(channel)
        return app, channel

    yield start
    for channel in reversed(started):
        await channel.stop()


async def processed(tg: FakeTelegram, channel: TelegramChannel, update_id: int) -> None:
    await handled(tg, channel.application, update_id)


def sent_to(tg: FakeTelegram, chat: int) -> list[str]:
    """The final text of every message the bot has in `chat`, oldest first."""
    return [m["text"] for (c, _), m in sorted(tg.messages.items(), key=lambda kv: kv[0][1]) if c == chat]


async def test_a_private_message_is_answered_with_model_markdown_as_telegram_html(bot, tg, fake_anthropic):
    await bot()
    fake_anthropic.script(text("Hello **Ada**, see `a < b`"))
    tg.private_message(ADA, "hi there")
    await tg.wait_until(lambda: sent_to(tg, ADA) == ["Hello <b>Ada</b>, see <code>a &lt; b</code>"])
    assert last_user_text(fake_anthropic.last_request.json) == "hi there"


async def test_start_up_registers_the_commands_and_uses_long_polling(bot, tg):
    await bot()
    (commands,) = tg.of("setMyCommands", lambda p: "language_code" not in p)
    names = {c["command"] for c in commands.params["commands"]}
    assert {"start", "help", "whoami", "tools", "new", "stop", "undo", "language"} <= names
    menus = {p.params["language_code"]: p.params["commands"]
             for p in tg.of("setMyCommands", lambda p: "language_code" in p)}
    assert set(menus) == {"it", "es"}
    assert [c["command"] for c in menus["it"]] == [c["command"] for c in commands.params["commands"]]
    assert "conversazione" in " ".join(c["description"] for c in menus["it"])
    assert tg.of("deleteWebhook")
    await tg.wait_for("getUpdates", lambda p: p.get("timeout", 0) > 0)


async def test_whoami_reports_the_user_never_the_chat(bot, tg):
    await bot()
    tg.group_message(GROUP, ADA, "/whoami", mention=True)
    await tg.wait_until(lambda: any("Sender: telegram:4242" in t for t in sent_to(tg, GROUP)))
    (answer,) = sent_to(tg, GROUP)
    assert "Autonomy: supervised" in answer and str(GROUP) not in answer


async def test_a_streamed_answer_is_one_message_edited_in_place(bot, tg, fake_anthropic):
    await bot()
    fake_anthropic.script(reply(text("First part of the answer, then **the rest** of it."),
                                chunk_delay=0.15))
    tg.private_message(ADA, "stream please")
    await tg.wait_until(lambda: sent_to(tg, ADA) == ["First part of the answer, then <b>the rest</b> of it."])
    assert len(tg.of("sendMessage", lambda p: p["chat_id"] == ADA)) == 1
    assert tg.of("editMessageText", lambda p: p["chat_id"] == ADA)


async def test_a_typing_indicator_is_shown_while_the_model_works(bot, tg, fake_anthropic):
    await bot()
    fake_anthropic.script(text("Thought about it.", delay=0.5))
    tg.private_message(ADA, "think")
    await tg.wait_for("sendChatAction", lambda p: p["chat_id"] == ADA and p["action"] == "typing")
    await tg.wait_until(lambda: sent_to(tg, ADA) == ["Thought about it."])


async def test_the_typing_indicator_is_refreshed_until_the_answer_arrives(bot, tg, fake_anthropic):
    await bot()  # FAST refreshes every 0.2 s
    fake_anthropic.script(text("Finally.", delay=1.0))
    tg.private_message(ADA, "think hard")
    await tg.wait_for("sendChatAction", lambda p: p["chat_id"] == ADA, count=3, timeout=5)
    assert sent_to(tg, ADA) == []  # three indicators while the one slow answer was pending
    await tg.wait_until(lambda: sent_to(tg, ADA) == ["Finally."])
    before = len(tg.of("sendChatAction"))
    tg.private_message(ADA, "/whoami")  # after the answer nothing keeps typing
    await tg.wait_until(lambda: any("Sender: telegram:" in t for t in sent_to(tg, ADA)))
    assert len(tg.of("sendChatAction")) - before <= 1


async def test_a_ten_thousand_character_reply_arrives_in_valid_parts_with_balanced_code(
        bot, tg, fake_anthropic):
    await bot()
    prose = "\n\n".join(f"Step {i}: " + "explain & detail " * 25 for i in range(10))
    code = "\n".join(f"total += item_{i}  # <{i}>" for i in range(220))
    answer = f"{prose}\n\n```python\n{code}\n```\n\nDone."
    assert len(answer) > 10_000
    fake_anthropic.script(text(answer))
    tg.private_message(ADA, "long one")
    await tg.wait_until(lambda: any(t.endswith("Done.") for t in sent_to(tg, ADA)), timeout=10)
    parts = sent_to(tg, ADA)
    assert len(parts) >= 3
    for part in parts:       # the fake refuses > 4096 characters and unbalanced HTML outright
        assert part.count("<pre>") == part.count("</pre>")
    with_code = [p for p in parts if "<pre>" in p]
    assert len(with_code) >= 2 and all('class="language-python"' in p for p in with_code)
    shown = "\n".join(re.sub(r"<[^>]+>", "", p) for p in parts)
    assert "total += item_0  # &lt;0&gt;" in shown and "total += item_219  # &lt;219&gt;" in shown


async def test_formatting_telegram_rejects_is_resent_as_plain_text(bot, tg, fake_anthropic):
    await bot()
    refusal = "Bad Request: can't parse entities: unsupported start tag"
    for method in ("sendMessage", "editMessageText"):
        tg.fail(method, description=refusal, times=50, when=lambda p: p.get("parse_mode") == "HTML")
    fake_anthropic.script(text("Plain **fallback** works"))
    tg.private_message(ADA, "format me")
    await tg.wait_until(lambda: sent_to(tg, ADA) == ["Plain **fallback** works"])
    assert any(c.error == refusal for c in tg.calls)


async def test_flood_control_is_honoured_and_the_reply_still_arrives(bot, tg, fake_anthropic):
    await bot(agent={"stream": False})
    tg.fail("sendMessage", status=429, description="Too Many Requests: retry after 1", retry_after=1)
    fake_anthropic.script(text("After the flood"))
    tg.private_message(ADA, "hello")
    await tg.wait_until(lambda: sent_to(tg, ADA) == ["After the flood"], timeout=5)
    refused = next(c for c in tg.calls if c.method == "sendMessage" and c.error)
    delivered = tg.of("sendMessage", lambda p: p["chat_id"] == ADA)[0]
    assert delivered.at - refused.at >= 1.0


async def test_a_group_message_is_answered_only_when_the_bot_is_mentioned(bot, tg, fake_anthropic):
    await bot()
    quiet = tg.group_message(GROUP, BOB, "just chatting among humans")
    mentioned = tg.group_message(GROUP, BOB, "what time is it?", mention=True)
    await tg.wait_until(lambda: sent_to(tg, GROUP) == ["ok: what time is it?"])
    assert [last_user_text(r.json) for r in fake_anthropic.requests] == ["what time is it?"]
    answer = tg.of("sendMessage", lambda p: p["chat_id"] == GROUP)[0]
    assert answer.params["reply_parameters"]["message_id"] == mentioned["message_id"]
    assert quiet["message_id"] != mentioned["message_id"]


async def test_a_reply_to_the_bot_in_a_group_counts_as_addressing_it(bot, tg, fake_anthropic):
    await bot()
    tg.group_message(GROUP, BOB, "first", mention=True)
    await tg.wait_until(lambda: sent_to(tg, GROUP) == ["ok: first"])
    bot_message = tg.of("sendMessage", lambda p: p["chat_id"] == GROUP)[0].result
    tg.group_message(GROUP, BOB, "and a follow-up", reply_to=bot_message)
    await tg.wait_until(lambda: sent_to(tg, GROUP) == ["ok: first", "ok: and a follow-up"])


async def test_an_unlisted_group_and_commands_for_other_bots_get_silence(bot, tg, fake_anthropic):
    _, channel = await bot()
    tg.group_message(OTHER_GROUP, BOB, "hello?", mention=True)
    tg.group_message(GROUP, BOB, "/help@some_other_bot")
    tg.group_message(GROUP, BOB, "/whoami@myclaw_test_bot")
    await tg.wait_until(lambda: any("Sender: telegram:4343" in t for t in sent_to(tg, GROUP)))
    await processed(tg, channel, tg.last_update_id)
    assert sent_to(tg, OTHER_GROUP) == []
    assert len(sent_to(tg, GROUP)) == 1
    assert fake_anthropic.requests == []


async def test_an_unknown_sender_gets_a_pairing_code_once_one_reminder_then_silence(bot, tg, fake_anthropic):
    _, channel = await bot()
    tg.private_message(STRANGER, "hello bot")
    await tg.wait_until(lambda: len(sent_to(tg, STRANGER)) == 1)
    (pairing,) = sent_to(tg, STRANGER)
    assert "pairing code" in pairing and "myclaw pair approve" in pairing
    tg.private_message(STRANGER, "again?")
    await processed(tg, channel, tg.last_update_id)
    assert len(sent_to(tg, STRANGER)) == 2 and "Still waiting" in sent_to(tg, STRANGER)[1]
    tg.private_message(STRANGER, "hello???")
    await processed(tg, channel, tg.last_update_id)
    assert len(sent_to(tg, STRANGER)) == 2
    assert fake_anthropic.requests == []
    assert not tg.of("sendChatAction", lambda p: p["chat_id"] == STRANGER)


async def test_a_pairing_code_asked_for_in_a_group_goes_to_a_private_chat(bot, tg, fake_anthropic):
    await bot()
    tg.group_message(GROUP, STRANGER, "let me in", mention=True)
    await tg.wait_until(lambda: len(sent_to(tg, STRANGER)) == 1)
    assert "pairing code" in sent_to(tg, STRANGER)[0]
    assert sent_to(tg, GROUP) == []


async def test_when_the_private_chat_is_refused_the_group_gets_a_hint_without_the_code(bot, tg):
    await bot()
    tg.fail("sendMessage", status=403, description="Forbidden: bot can't initiate conversation with a user",
            times=2, when=lambda p: p["chat_id"] == STRANGER)
    tg.group_message(GROUP, STRANGER, "let me in", mention=True)
    await tg.wait_until(lambda: len(sent_to(tg, GROUP)) == 1)
    (hint,) = sent_to(tg, GROUP)
    assert "open a chat with me" in hint and "pairing code" not in hint and "approve" not in hint


async def test_a_sticker_gets_a_polite_answer_and_a_photo_caption_still_reaches_the_model(
        bot, tg, fake_anthropic):
    await bot()
    tg.private_message(ADA, None, sticker={"file_id": "s1", "file_unique_id": "u1", "type": "regular",
                                           "width": 512, "height": 512, "is_animated": False,
                                           "is_video": False})
    await tg.wait_until(lambda: sent_to(tg, ADA) == ["I can only read text messages."])
    # A photo whose file Telegram no longer has: the sender is told, the caption still goes on.
    tg.private_message(ADA, None, caption="what is in this picture?",
                       photo=[{"file_id": "p1", "file_unique_id": "pu1", "width": 90, "height": 90}])
    await tg.wait_until(lambda: len(sent_to(tg, ADA)) == 3)
    assert "download from Telegram failed" in sent_to(tg, ADA)[1]
    assert last_user_text(fake_anthropic.last_request.json).endswith("what is in this picture?")


async def test_two_chats_run_concurrently_while_each_chat_stays_in_order(bot, tg, fake_anthropic):
    _, channel = await bot()

    def responder(body):
        said = last_user_text(body)
        return text(f"ok: {said}", delay=0.6 if said == "ada one" else 0.0)

    fake_anthropic.responder = responder
    tg.private_message(ADA, "ada one")
    tg.private_message(ADA, "ada two")
    await fake_anthropic.wait_for_requests(1)
    tg.private_message(BOB, "bob one")
    await tg.wait_until(lambda: sent_to(tg, ADA) == ["ok: ada one", "ok: ada two"], timeout=5)
    bob_answer = tg.of("sendMessage", lambda p: p["chat_id"] == BOB)[0]
    ada_first = tg.of("sendMessage", lambda p: p["chat_id"] == ADA)[0]
    assert bob_answer.at < ada_first.at, "Bob waited behind Ada's slow turn"
    asked = [last_user_text(r.json) for r in fake_anthropic.requests]
    assert asked.index("ada one") < asked.index("ada two")
    await processed(tg, channel, tg.last_update_id)
    assert channel.active_chat_locks == 0


async def test_a_model_failure_becomes_one_clear_line(bot, tg, fake_anthropic):
    await bot()
    fake_anthropic.script(error(400, "invalid_request_error", "bad request",
                                headers={"x-should-retry": "false"}))
    tg.private_message(ADA, "break")
    await tg.wait_until(lambda: len(sent_to(tg, ADA)) == 1)
    (line,) = sent_to(tg, ADA)
    assert line.startswith("⚠️") and "\n" not in line


async def test_a_tool_run_shows_one_status_message_edited_in_place(bot, tg, fake_anthropic):
    await bot()
    fake_anthropic.script(reply(text("Checking the clock."), tool_use("time_now", {})), text("It is now."))
    tg.private_message(ADA, "time?")
    await tg.wait_until(lambda: sent_to(tg, ADA) == ["Checking the clock.", "✅ time_now", "It is now."])
    status = tg.of("sendMessage", lambda p: "time_now" in p["text"])
    assert len(status) == 1 and status[0].params["text"] == "⚙️ time_now…"


async def test_stop_reaches_the_agent_while_a_slow_turn_of_the_same_chat_is_running(bot, tg, fake_anthropic):
    await bot()
    fake_anthropic.script(text("far too late", delay=5.0))
    tg.private_message(ADA, "take your time")
    await fake_anthropic.wait_for_requests(1)
    tg.private_message(ADA, "/stop")
    await tg.wait_until(lambda: sent_to(tg, ADA) == ["Stopped."], timeout=2)


async def test_an_answer_in_a_forum_topic_stays_in_that_topic(bot, tg, fake_anthropic):
    await bot()
    chat = {"id": GROUP, "type": "supergroup", "title": "Team", "is_forum": True}
    handle = "@myclaw_test_bot"
    message = tg.make_message(chat, BOB, f"{handle} hello topic", message_thread_id=77, is_topic_message=True,
                              entities=[{"type": "mention", "offset": 0, "length": len(handle)}])
    tg.inject({"message": message})
    await tg.wait_until(lambda: sent_to(tg, GROUP) == ["ok: hello topic"])
    assert all(c.params.get("message_thread_id") == 77 for c in tg.of("sendMessage"))
