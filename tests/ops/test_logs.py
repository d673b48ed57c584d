"""Logs: readable text or JSON lines, the per-turn fields rendered, and no secret ever written.

The secrets travel through the real libraries where they leak in practice: python-telegram-bot
puts the bot token in every request URL (which httpx logs at INFO), and exceptions carry what the
server answered. The Bot API is a fake on 127.0.0.1.
"""

from __future__ import annotations

import io
import json
import logging
from urllib.parse import quote

import pytest
import telegram
from aiohttp import web

from bot.core import logs

SECRET_KEY = "sk-test-anthropic-4f1c9a7e2b"           # given to configure(), no known shape
TELEGRAM_TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ"  # caught by its shape alone
ANTHROPIC_SHAPED = "sk-ant-api03-Zm9vYmFyYmF6cXV4cXV1eA"        # caught by its shape alone
BEARER = "tok_9f8e7d6c5b4a"
ALL_SECRETS = (SECRET_KEY, TELEGRAM_TOKEN, ANTHROPIC_SHAPED, BEARER)


@pytest.fixture
def capture():
    """configure() into a StringIO; afterwards the root logger is as it was."""
    root = logging.getLogger()
    saved_level = root.level
    saved_levels = {n: logging.getLogger(n).level for n in ("httpx", "httpcore", "telegram")}
    streams: list[io.StringIO] = []

    def install(fmt: str = "text", level: str = "DEBUG") -> io.StringIO:
        stream = io.StringIO()
        logs.configure(fmt=fmt, level=level, secrets=[SECRET_KEY], stream=stream)
        streams.append(stream)
        return stream

    yield install
    for handler in [h for h in root.handlers if isinstance(h, logs.MyclawHandler)]:
        root.removeHandler(handler)
    root.setLevel(saved_level)
    for name, level in saved_levels.items():
        logging.getLogger(name).setLevel(level)
    logging.captureWarnings(False)


def assert_no_secret(output: str) -> None:
    leaked = [s for s in ALL_SECRETS if s in output]
    assert not leaked, f"secrets leaked into the log: {leaked}\n{output}"


def log_everything_with_secrets(log: logging.Logger) -> None:
    log.info(f"calling the API with {SECRET_KEY}")
    log.warning("token in args: %s and %r", TELEGRAM_TOKEN, {"key": ANTHROPIC_SHAPED})
    log.info("turn", extra={"sender": "telegram:42", "headers": {"authorization": f"Bearer {BEARER}"},
                            "tools": [f"fetch {SECRET_KEY}"], "latency_ms": 12})
    try:
        raise ValueError(f"server rejected key {SECRET_KEY} for bot{TELEGRAM_TOKEN}")
    except ValueError:
        log.exception("the call failed")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_secrets_in_messages_args_extras_and_tracebacks_are_redacted(capture, fmt):
    stream = capture(fmt)
    log_everything_with_secrets(logging.getLogger("bot.runtime.agent"))
    output = stream.getvalue()
    assert_no_secret(output)
    assert output.count(logs.REDACTED) >= 7
    # The lines themselves survive: only the secrets are gone.
    for kept in ("calling the API with", "token in args", "the call failed", "ValueError",
                 "telegram:42", "Traceback"):
        assert kept in output


def test_a_secret_is_redacted_for_every_handler_behind_the_filter(capture):
    """The filter rewrites the record, so a handler added after ours sees it redacted too."""
    capture("text")
    later = io.StringIO()
    extra_handler = logging.StreamHandler(later)
    logging.getLogger().addHandler(extra_handler)
    try:
        logging.getLogger("bot").error("key=%s", SECRET_KEY)
    finally:
        logging.getLogger().removeHandler(extra_handler)
    assert later.getvalue() == f"key={logs.REDACTED}\n"


async def test_telegram_token_in_httpx_request_lines_is_held_back_and_redacted(capture):
    """python-telegram-bot → httpx logs `POST .../bot<TOKEN>/getMe`; we hold httpx at WARNING,
    and if someone turns it up, the token is still redacted."""
    seen: list[str] = []

    async def get_me(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response({"ok": True, "result": {
            "id": 123456789, "is_bot": True, "first_name": "claw", "username": "claw_bot"}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", get_me)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        stream = capture("json", level="DEBUG")
        bot = telegram.Bot(TELEGRAM_TOKEN, base_url=f"{base}/bot")
        async with bot:
            await bot.get_me()
        held_back = stream.getvalue()
        logging.getLogger("httpx").setLevel(logging.INFO)  # someone turns request lines back on
        async with telegram.Bot(TELEGRAM_TOKEN, base_url=f"{base}/bot") as bot2:
            await bot2.get_me()
    finally:
        await runner.cleanup()
    assert seen and all(path == f"/bot{TELEGRAM_TOKEN}/getMe" for path in seen)
    assert "HTTP Request" not in held_back
    output = stream.getvalue()
    request_lines = [json.loads(line) for line in output.splitlines()
                     if json.loads(line)["logger"] == "httpx"]
    assert request_lines, "httpx at INFO should have logged the request"
    assert all(f"/bot{logs.REDACTED}/getMe" in line["msg"] for line in request_lines)
    assert_no_secret(output)


async def test_an_error_response_echoing_the_token_is_redacted_in_the_traceback(capture):
    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({"ok": False, "error_code": 401,
                                  "description": f"Unauthorized token {TELEGRAM_TOKEN}"}, status=401)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    stream = capture("text")
    try:
        bot = telegram.Bot(TELEGRAM_TOKEN, base_url=f"http://127.0.0.1:{runner.addresses[0][1]}/bot")
        with pytest.raises(telegram.error.InvalidToken) as raised:
            await bot.get_me()
        logging.getLogger("channels.telegram").error("start-up failed", exc_info=raised.value)
    finally:
        await runner.cleanup()
    output = stream.getvalue()
    assert "InvalidToken" in output and "start-up failed" in output
    assert_no_secret(output)


def test_a_secret_is_redacted_in_its_url_encoded_spelling_too(capture):
    stream = io.StringIO()
    logs.configure(fmt="text", level="INFO", secrets=["p@ss/w0rd+key"], stream=stream)
    logging.getLogger("bot").info("GET https://api.example.org/v1?key=%s", quote("p@ss/w0rd+key", safe=""))
    output = stream.getvalue()
    assert "w0rd" not in output and f"?key={logs.REDACTED}" in output


def test_the_turn_line_renders_every_field_as_json(capture):
    stream = capture("json", level="INFO")
    logging.getLogger("bot.runtime.agent").info("turn", extra={
        "sender": "telegram:42", "session": "ab12", "tools": ["fs_read", "shell_run"],
        "decisions": ["allow", "ask"], "tokens": {"input": 1200, "output": 80}, "latency_ms": 840})
    (line,) = stream.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["msg"] == "turn" and entry["level"] == "INFO" and entry["logger"] == "bot.runtime.agent"
    assert entry["ts"].endswith("+00:00")
    assert entry["tools"] == ["fs_read", "shell_run"]
    assert entry["decisions"] == ["allow", "ask"]
    assert entry["tokens"] == {"input": 1200, "output": 80}
    assert entry["latency_ms"] == 840 and entry["session"] == "ab12"


def test_text_lines_are_human_readable_with_the_fields_appended(capture):
    stream = capture("text", level="INFO")
    logging.getLogger("bot.runtime.agent").info("turn", extra={"sender": "telegram:42", "latency_ms": 840,
                                                         "tools": ["fs_read"]})
    line = stream.getvalue().rstrip("\n")
    assert " INFO bot.runtime.agent: turn sender=telegram:42 latency_ms=840 tools=[\"fs_read\"]" in line
    assert "\n" not in line


def test_levels_below_the_configured_one_are_dropped(capture):
    stream = capture("text", level="WARNING")
    logging.getLogger("bot").info("quiet")
    logging.getLogger("bot").warning("loud")
    assert "quiet" not in stream.getvalue() and "loud" in stream.getvalue()


def test_configuring_twice_leaves_one_handler(capture):
    capture("text")
    stream = capture("json")
    ours = [h for h in logging.getLogger().handlers if isinstance(h, logs.MyclawHandler)]
    assert len(ours) == 1
    logging.getLogger("bot").warning("once")
    assert len(stream.getvalue().splitlines()) == 1


def test_a_log_call_with_broken_arguments_is_kept_and_explained(capture):
    stream = capture("text")
    handler = next(h for h in logging.getLogger().handlers if isinstance(h, logs.MyclawHandler))
    # Straight to our handler: pytest's own capture handler would raise on the bad args first.
    record = logging.getLogger("bot").makeRecord("bot", logging.WARNING, __file__, 1,
                                                 "two values %s %s", (SECRET_KEY,), None)
    handler.handle(record)
    output = stream.getvalue()
    assert "two values" in output and "did not format" in output
    assert_no_secret(output)


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="'xml'"):
        logs.configure(fmt="xml", level="INFO", secrets=[])
