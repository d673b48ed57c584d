"""A fake Telegram Bot API on 127.0.0.1 that the real python-telegram-bot talks to via base_url.

It speaks the wire format PTB uses (form-encoded fields, each JSON-encoded unless it is a plain
string; answers `{"ok": true, "result": ...}`; errors carry `error_code`, `description` and
`parameters.retry_after`), holds getUpdates like the real long poll, keeps the state of every
message it was asked to send or edit, and checks HTML the way Telegram does (known tags only,
well nested, known entities, at most 4096 characters of text) so a test fails if the channel ever
sends something Telegram would refuse.

    async with FakeTelegram() as fake:
        ... ApplicationBuilder().token(fake.token).base_url(fake.base_url) ...
        fake.private_message(42, "hello")
        call = await fake.wait_for("sendMessage", lambda p: p["chat_id"] == 42)
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import aiohttp
from aiohttp import web

Params = dict[str, Any]
Predicate = Callable[[Params], bool]

# Fields PTB sends as bare strings; JSON-decoding them would turn "123" into 123.
_STRING_FIELDS = {"text", "caption", "parse_mode", "url", "secret_token", "callback_query_id",
                  "action", "inline_message_id", "description", "short_description"}
_ACKNOWLEDGED = {"setMyCommands", "sendChatAction", "answerCallbackQuery"}   # answered with True
_HTML_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "code", "pre", "a",
              "tg-spoiler", "span", "blockquote", "tg-emoji"}


@dataclass
class Call:
    method: str
    params: Params
    result: Any = None
    error: str | None = None
    at: float = field(default_factory=time.monotonic)


@dataclass
class _FailRule:
    method: str
    status: int
    description: str
    retry_after: int | None
    times: int
    when: Predicate | None


class _TelegramHTML(HTMLParser):
    """Parses text the way Telegram's HTML parse mode does: the first problem and the visible text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=False)
        self.stack: list[str] = []
        self.visible: list[str] = []
        self.problem: str | None = None
        self.feed(text)
        self.close()
        if self.stack:
            self._refuse(f"unclosed tag \"{self.stack[-1]}\"")

    def _refuse(self, problem: str) -> None:
        self.problem = self.problem or problem

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _HTML_TAGS:
            self._refuse(f"unsupported start tag \"{tag}\"")
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self._refuse(f"unexpected end tag \"{tag}\"")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if any(c in data for c in "<>&"):
            self._refuse("unescaped <, > or &")
        self.visible.append(data)

    def handle_entityref(self, name: str) -> None:
        if name not in ("lt", "gt", "amp", "quot"):
            self._refuse(f"unsupported entity &{name};")
        self.visible.append("?")

    def handle_charref(self, name: str) -> None:
        self.visible.append("?")


def html_problem(text: str) -> str | None:
    """Why Telegram would refuse `text` in HTML parse mode, or None when it is fine."""
    return _TelegramHTML(text).problem


def text_length(text: str, parse_mode: str | None) -> int:
    """Length as Telegram counts it: UTF-16 units of the visible text."""
    visible = "".join(_TelegramHTML(text).visible) if parse_mode == "HTML" else text
    return len(visible.encode("utf-16-le")) // 2


async def handled(fake: FakeTelegram, application: Any, update_id: int) -> None:
    """Wait until a polling PTB `application` fetched `update_id` (a later getUpdates confirms it)
    and finished handling every update it fetched (PTB marks each one done on its queue)."""
    await fake.wait_for("getUpdates", lambda p: int(p.get("offset") or 0) > update_id)
    await asyncio.wait_for(application.update_queue.join(), timeout=5)


def channel_overrides(fake: FakeTelegram, **telegram: Any) -> dict[str, Any]:
    """The `[telegram]` config section that points a channel at this fake."""
    return {"telegram": {"base_url": fake.base_url, "base_file_url": fake.base_file_url, **telegram}}


class FakeTelegram:
    def __init__(self, token: str = "123456:TEST-token_abc", bot_id: int = 999000,
                 username: str = "myclaw_test_bot"):
        self.token = token
        self.bot_user = {"id": bot_id, "is_bot": True, "first_name": "Myclaw", "username": username,
                         "can_join_groups": True, "can_read_all_group_messages": False,
                         "supports_inline_queries": False}
        self.calls: list[Call] = []
        self.messages: dict[tuple[int, int], dict[str, Any]] = {}   # (chat, id) -> message
        self.webhook: dict[str, Any] = {}
        self.max_poll_seconds = 30.0
        self._updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self._callback_ids = itertools.count(1)
        self._rules: list[_FailRule] = []
        self._changed: asyncio.Condition | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.last_update_id = 0
        self._closing = False
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> FakeTelegram:
        self._changed = asyncio.Condition()
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._changed is not None
        async with self._changed:
            self._closing = True       # release held long polls so the server stops at once
            self._changed.notify_all()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    # --- controlling the fake -----------------------------------------------------------------

    def fail(self, method: str, *, status: int = 400, description: str = "Bad Request",
             retry_after: int | None = None, times: int = 1, when: Predicate | None = None) -> None:
        """Make the next `times` calls of `method` (matching `when`) fail with this error."""
        self._rules.append(_FailRule(method, status, description, retry_after, times, when))

    def of(self, method: str, predicate: Predicate | None = None) -> list[Call]:
        return [c for c in self.calls
                if c.method == method and c.error is None and (predicate is None or predicate(c.params))]

    async def wait_for(self, method: str, predicate: Predicate | None = None, timeout: float = 5.0,
                       count: int = 1) -> Call:
        """Wait until `count` successful calls of `method` match; return the last of them."""
        assert self._changed is not None
        async with self._changed:
            try:
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: len(self.of(method, predicate)) >= count), timeout)
            except TimeoutError as exc:
                seen = [(c.method, c.params.get("text", "")[:60]) for c in self.calls[-10:]]
                raise AssertionError(f"no {count}x {method} matching within {timeout}s; "
                                     f"last calls: {seen}") from exc
        return self.of(method, predicate)[count - 1]

    async def wait_until(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        assert self._changed is not None
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(condition), timeout)

    # --- injecting updates --------------------------------------------------------------------

    def inject(self, update: dict[str, Any]) -> dict[str, Any]:
        update = {"update_id": next(self._update_ids), **update}
        self.last_update_id = update["update_id"]
        self._updates.append(update)
        self._notify()
        return update

    @staticmethod
    def user(user_id: int, first_name: str = "Ada") -> dict[str, Any]:
        return {"id": user_id, "is_bot": False, "first_name": first_name}

    def make_message(self, chat: dict[str, Any], user_id: int, text: str | None = None,
                     **extra: Any) -> dict[str, Any]:
        message: dict[str, Any] = {"message_id": next(self._message_ids), "date": int(time.time()),
                                   "chat": chat, "from": self.user(user_id), **extra}
        if text is not None:
            message["text"] = text
            if text.startswith("/"):
                length = len(text.split(maxsplit=1)[0])
                message["entities"] = [{"type": "bot_command", "offset": 0, "length": length}]
        return message

    def private_message(self, user_id: int, text: str | None = None, **extra: Any) -> dict[str, Any]:
        chat = {"id": user_id, "type": "private", "first_name": "Ada"}
        message = self.make_message(chat, user_id, text, **extra)
        self.inject({"message": message})
        return message

    def group_message(self, chat_id: int, user_id: int, text: str, *, mention: bool = False,
                      reply_to: dict[str, Any] | None = None) -> dict[str, Any]:
        chat = {"id": chat_id, "type": "supergroup", "title": "Team"}
        handle = f"@{self.bot_user['username']}"
        if mention:
            text = f"{handle} {text}"
        message = self.make_message(chat, user_id, text)
        if mention:
            message["entities"] = [{"type": "mention", "offset": 0, "length": len(handle)}]
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        self.inject({"message": message})
        return message

    def tap(self, user_id: int, data: str, message: dict[str, Any], name: str = "Ada") -> str:
        """A tap on an inline button of `message` (a bot message as returned by sendMessage)."""
        query_id = f"cq{next(self._callback_ids)}"
        self.inject({"callback_query": {"id": query_id, "from": self.user(user_id, name),
                                        "chat_instance": "ci-1", "data": data, "message": message}})
        return query_id

    async def deliver_to_webhook(self, update: dict[str, Any], secret: str | None = "<registered>") -> int:
        """POST an update to the webhook set with setWebhook (as Telegram would); returns the status."""
        target = self.webhook["url"]
        if secret == "<registered>":
            secret = self.webhook.get("secret_token")
        headers = {"X-Telegram-Bot-Api-Secret-Token": secret} if secret is not None else {}
        update = {"update_id": next(self._update_ids), **update}
        async with aiohttp.ClientSession() as session, \
                session.post(target, json=update, headers=headers) as response:
            return response.status

    # --- the Bot API ---------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        call = Call(method, params)
        if request.match_info["token"] != self.token:
            return await self._error(call, 401, "Unauthorized")
        rule = self._matching_rule(method, params)
        if rule is not None:
            return await self._error(call, rule.status, rule.description, rule.retry_after)
        handler = (lambda _params: True) if method in _ACKNOWLEDGED else getattr(self, f"_api_{method}", None)
        if handler is None:
            return await self._error(call, 404, "Not Found: method not found")
        if method == "getUpdates":
            await self._record(call)   # visible while the long poll is held
            call.result = await self._api_getUpdates(params)
            return web.json_response({"ok": True, "result": call.result})
        try:
            call.result = handler(params)
        except _ApiError as exc:
            return await self._error(call, 400, exc.description)
        await self._record(call)
        return web.json_response({"ok": True, "result": call.result})

    async def _params(self, request: web.Request) -> Params:
        form = await request.post()
        params: Params = {}
        for key, value in form.items():
            if not isinstance(value, str) or key in _STRING_FIELDS:
                params[key] = value
                continue
            try:
                params[key] = json.loads(value)
            except ValueError:
                params[key] = value
        return params

    def _matching_rule(self, method: str, params: Params) -> _FailRule | None:
        for rule in self._rules:
            if rule.method == method and rule.times > 0 and (rule.when is None or rule.when(params)):
                rule.times -= 1
                return rule
        return None

    async def _error(self, call: Call, status: int, description: str,
                     retry_after: int | None = None) -> web.Response:
        call.error = description
        await self._record(call)
        body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
        if retry_after is not None:
            body["parameters"] = {"retry_after": retry_after}
        return web.json_response(body, status=status)

    async def _record(self, call: Call) -> None:
        assert self._changed is not None
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()

    def _notify(self) -> None:
        task = asyncio.get_running_loop().create_task(self._notify_async())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _notify_async(self) -> None:
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    # --- methods -----------------------------------------------------------------------------

    def _api_getMe(self, params: Params) -> dict[str, Any]:
        return self.bot_user

    def _api_deleteWebhook(self, params: Params) -> bool:
        self.webhook = {}
        return True

    def _api_setWebhook(self, params: Params) -> bool:
        self.webhook = dict(params)
        return True

    async def _api_getUpdates(self, params: Params) -> list[dict[str, Any]]:
        assert self._changed is not None
        offset = int(params.get("offset") or 0)
        self._updates = [u for u in self._updates if u["update_id"] >= offset]
        timeout = min(float(params.get("timeout") or 0), self.max_poll_seconds)
        if not self._updates and timeout > 0:
            async with self._changed:
                try:
                    await asyncio.wait_for(
                        self._changed.wait_for(lambda: bool(self._updates) or self._closing), timeout)
                except TimeoutError:
                    pass
        limit = int(params.get("limit") or 100)
        return self._updates[:limit]

    def _api_sendMessage(self, params: Params) -> dict[str, Any]:
        text = self._checked_text(params)
        chat_id = int(params["chat_id"])
        chat = {"id": chat_id, "type": "private", "first_name": "Ada"} if chat_id > 0 else \
            {"id": chat_id, "type": "supergroup", "title": "Team"}
        message: dict[str, Any] = {"message_id": next(self._message_ids), "date": int(time.time()),
                                   "chat": chat, "from": self.bot_user, "text": text}
        if params.get("reply_markup"):
            message["reply_markup"] = params["reply_markup"]
        self.messages[(chat_id, message["message_id"])] = message
        return message

    def _api_editMessageText(self, params: Params) -> dict[str, Any]:
        message = self._existing(params)
        text = self._checked_text(params)
        markup = params.get("reply_markup")
        if text == message["text"] and markup == message.get("reply_markup"):
            raise _ApiError("Bad Request: message is not modified: specified new message content "
                            "and reply markup are exactly the same as a current content and reply "
                            "markup of the message")
        message["text"] = text
        return self._api_editMessageReplyMarkup(params)   # like Telegram: no markup removes the buttons

    def _api_editMessageReplyMarkup(self, params: Params) -> dict[str, Any]:
        message = self._existing(params)
        message.pop("reply_markup", None)
        if params.get("reply_markup"):
            message["reply_markup"] = params["reply_markup"]
        return message

    def _api_deleteMessage(self, params: Params) -> bool:
        self.messages.pop((int(params["chat_id"]), int(params["message_id"])), None)
        return True

    def _existing(self, params: Params) -> dict[str, Any]:
        key = (int(params.get("chat_id", 0)), int(params.get("message_id", 0)))
        if key not in self.messages:
            raise _ApiError("Bad Request: message to edit not found")
        return self.messages[key]

    @staticmethod
    def _checked_text(params: Params) -> str:
        text = str(params.get("text", ""))
        if not text.strip():
            raise _ApiError("Bad Request: message text is empty")
        parse_mode = params.get("parse_mode")
        if parse_mode == "HTML":
            problem = html_problem(text)
            if problem:
                raise _ApiError(f"Bad Request: can't parse entities: {problem}")
        if text_length(text, parse_mode) > 4096:
            raise _ApiError("Bad Request: message is too long")
        return text


class _ApiError(Exception):
    def __init__(self, description: str):
        super().__init__(description)
        self.description = description
