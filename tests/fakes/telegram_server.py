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

`fake.hold(method, when)` stops the next matching call on arrival, before it has any effect, to
freeze the bot at a chosen point (the crash tests kill it there): `await hold.reached.wait()`,
then `hold.release()` (the call goes on) or `hold.drop()` (it fails as if it never got through).
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

from tests.fakes import EVENTUALLY, unique_suffix

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
class Hold:
    """One call held on arrival (see FakeTelegram.hold)."""

    method: str
    when: Predicate | None
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    params: Params | None = None
    dropped: bool = False
    taken: bool = False

    def release(self) -> None:
        self.gate.set()

    def drop(self) -> None:
        """Fail the held call; a hold no call reached yet is cancelled."""
        self.dropped = True
        self.gate.set()


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
    def __init__(self, token: str | None = None, bot_id: int = 999000,
                 username: str = "myclaw_test_bot"):
        self.token = token or f"123456:TEST-token_{unique_suffix()}"
        self.bot_user = {"id": bot_id, "is_bot": True, "first_name": "Myclaw", "username": username,
                         "can_join_groups": True, "can_read_all_group_messages": False,
                         "supports_inline_queries": False}
        self.calls: list[Call] = []
        self.messages: dict[tuple[int, int], dict[str, Any]] = {}   # (chat, id) -> message
        self.webhook: dict[str, Any] = {}
        self.max_poll_seconds = 30.0
        # The language each user's app is set to (sent as `from.language_code`, as Telegram does)
        self.language_codes: dict[int, str] = {}
        self._updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self._callback_ids = itertools.count(1)
        self._rules: list[_FailRule] = []
        self._holds: list[Hold] = []
        self.files: dict[str, tuple[str, bytes]] = {}    # file_id -> (file_path, content)
        self.downloads: list[str] = []                  # file paths fetched from /file/bot…
        self.uploads: list[dict[str, Any]] = []         # files the bot sent (sendDocument/Photo/Voice)
        self.voice_forbidden = False                    # sendVoice refused as Telegram does
        self._file_ids = itertools.count(1)
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
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._changed is not None
        for held in self._holds:
            held.drop()
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

    def hold(self, method: str, when: Predicate | None = None) -> Hold:
        """Hold the next call of `method` (matching `when`) on arrival until released or dropped."""
        held = Hold(method, when)
        self._holds.append(held)
        return held

    def of(self, method: str, predicate: Predicate | None = None) -> list[Call]:
        return [c for c in self.calls
                if c.method == method and c.error is None and (predicate is None or predicate(c.params))]

    def cards(self, predicate: Predicate | None = None) -> list[Call]:
        """The calls that first put buttons on a message: a message sent with them, or the first
        edit giving them to a message sent without (a request goes out as text, then is armed)."""
        bare: set[tuple[int, int]] = set()
        shown = []
        for call in self.calls:
            if call.error is not None or call.method not in ("sendMessage", "editMessageText"):
                continue
            armed = bool((call.params.get("reply_markup") or {}).get("inline_keyboard"))
            if call.method == "sendMessage":
                if not armed:
                    bare.add((int(call.params["chat_id"]), int(call.result["message_id"])))
            else:
                key = (int(call.params["chat_id"]), int(call.params["message_id"]))
                if not armed or key not in bare:
                    continue
                bare.discard(key)
            if armed and (predicate is None or predicate(call.params)):
                shown.append(call)
        return shown

    def redraws(self, card: Call) -> list[Call]:
        """The edits of a card's message since it got its buttons (see `cards`)."""
        start = next(i for i, call in enumerate(self.calls) if call is card)
        key = (int(card.params["chat_id"]), int(card.result["message_id"]))
        return [c for c in self.calls[start + 1:] if c.method == "editMessageText"
                and c.error is None
                and (int(c.params["chat_id"]), int(c.params["message_id"])) == key]

    async def wait_for_redraw(self, card: Call, timeout: float = EVENTUALLY) -> Call:
        """Wait for the first edit of a card's message since it got its buttons."""
        await self.wait_until(lambda: bool(self.redraws(card)), timeout)
        return self.redraws(card)[0]

    async def wait_for_card(self, predicate: Predicate | None = None, timeout: float = EVENTUALLY,
                            count: int = 1) -> Call:
        """Wait until `count` messages matching `predicate` have been given buttons."""
        assert self._changed is not None
        async with self._changed:
            try:
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: len(self.cards(predicate)) >= count), timeout)
            except TimeoutError as exc:
                raise AssertionError(f"no {count}x card with buttons matching within {timeout}s") \
                    from exc
        return self.cards(predicate)[count - 1]

    async def wait_for(self, method: str, predicate: Predicate | None = None, timeout: float = EVENTUALLY,
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

    async def wait_until(self, condition: Callable[[], bool], timeout: float = EVENTUALLY) -> None:
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

    def user(self, user_id: int, first_name: str = "Ada") -> dict[str, Any]:
        user = {"id": user_id, "is_bot": False, "first_name": first_name}
        if user_id in self.language_codes:
            user["language_code"] = self.language_codes[user_id]
        return user

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

    def add_file(self, content: bytes, path: str) -> dict[str, Any]:
        """Make `content` downloadable (getFile, then GET /file/bot<token>/<path>); returns the
        fields a message's photo/document/voice object carries."""
        number = next(self._file_ids)
        file_id = f"file-{number}"
        self.files[file_id] = (f"{path.rsplit('.', 1)[0]}_{number}.{path.rsplit('.', 1)[-1]}", content)
        return {"file_id": file_id, "file_unique_id": f"unique-{number}", "file_size": len(content)}

    def private_photo(self, user_id: int, content: bytes, caption: str | None = None,
                      width: int = 1280, height: int = 960) -> dict[str, Any]:
        """A photo as Telegram delivers it: a thumbnail and the full size (largest last)."""
        small = {**self.add_file(content[:100], "photos/thumb.jpg"), "width": 90, "height": 68}
        large = {**self.add_file(content, "photos/file.jpg"), "width": width, "height": height}
        extra: dict[str, Any] = {"photo": [small, large]}
        if caption is not None:
            extra["caption"] = caption
        return self.private_message(user_id, None, **extra)

    def private_document(self, user_id: int, content: bytes, file_name: str, mime_type: str,
                         caption: str | None = None) -> dict[str, Any]:
        document = {**self.add_file(content, f"documents/{file_name}"), "file_name": file_name,
                    "mime_type": mime_type}
        extra: dict[str, Any] = {"document": document}
        if caption is not None:
            extra["caption"] = caption
        return self.private_message(user_id, None, **extra)

    def private_voice(self, user_id: int, content: bytes,
                      forwarded_from: str | None = None) -> dict[str, Any]:
        voice = {**self.add_file(content, "voice/file.oga"), "duration": 3, "mime_type": "audio/ogg"}
        extra: dict[str, Any] = {"voice": voice}
        if forwarded_from is not None:
            extra["forward_origin"] = {"type": "hidden_user", "date": int(time.time()),
                                       "sender_user_name": forwarded_from}
        return self.private_message(user_id, None, **extra)

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
        held = self._matching_hold(method, params)
        if held is not None:
            held.params = params
            held.reached.set()
            await held.gate.wait()
            if held.dropped:   # as a request lost on the way: no effect, nothing recorded
                return web.json_response({"ok": False, "error_code": 502,
                                          "description": "Bad Gateway"}, status=502)
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

    async def _download(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        if request.match_info["token"] != self.token:
            return web.json_response({"ok": False, "error_code": 401, "description": "Unauthorized"},
                                     status=401)
        content = next((data for stored, data in self.files.values() if stored == path), None)
        if content is None:
            return web.json_response({"ok": False, "error_code": 404, "description": "Not Found"},
                                     status=404)
        self.downloads.append(path)
        await self._notify_async()
        return web.Response(body=content, content_type="application/octet-stream")

    async def _params(self, request: web.Request) -> Params:
        form = await request.post()
        params: Params = {}
        for key, value in form.items():
            if isinstance(value, web.FileField):
                params[key] = {"filename": value.filename, "content_type": value.content_type,
                               "data": value.file.read()}
                continue
            if not isinstance(value, str) or key in _STRING_FIELDS:
                params[key] = value
                continue
            try:
                params[key] = json.loads(value)
            except ValueError:
                params[key] = value
        return params

    def _matching_hold(self, method: str, params: Params) -> Hold | None:
        for held in self._holds:
            waiting = not held.taken and not held.gate.is_set()
            if waiting and held.method == method and (held.when is None or held.when(params)):
                held.taken = True
                return held
        return None

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

    def _api_getFile(self, params: Params) -> dict[str, Any]:
        file_id = str(params.get("file_id", ""))
        if file_id not in self.files:
            raise _ApiError("Bad Request: invalid file_id")
        path, content = self.files[file_id]
        return {"file_id": file_id, "file_unique_id": f"u-{file_id}", "file_size": len(content),
                "file_path": path}

    def _api_sendDocument(self, params: Params) -> dict[str, Any]:
        return self._upload(params, "document")

    def _api_sendPhoto(self, params: Params) -> dict[str, Any]:
        return self._upload(params, "photo")

    def _api_sendVoice(self, params: Params) -> dict[str, Any]:
        if self.voice_forbidden:   # the person's privacy settings refuse voice messages
            raise _ApiError("Bad Request: VOICE_MESSAGES_FORBIDDEN")
        return self._upload(params, "voice")

    def _upload(self, params: Params, field_name: str) -> dict[str, Any]:
        upload = params.get(field_name)
        if not isinstance(upload, dict) or not upload.get("data"):
            raise _ApiError(f"Bad Request: there is no {field_name} in the request")
        if len(upload["data"]) > (10_000_000 if field_name == "photo" else 50_000_000):
            raise _ApiError("Request Entity Too Large")
        chat_id = int(params["chat_id"])
        self.uploads.append({"method": field_name, "chat_id": chat_id, **upload,
                             "caption": params.get("caption", ""),
                             "duration": params.get("duration")})
        message: dict[str, Any] = {"message_id": next(self._message_ids), "date": int(time.time()),
                                   "chat": {"id": chat_id, "type": "private", "first_name": "Ada"},
                                   "from": self.bot_user}
        if field_name == "voice":
            message["voice"] = {"file_id": "sent", "file_unique_id": "sent",
                                "duration": int(params.get("duration") or 0)}
        elif field_name == "photo":
            message["photo"] = [{"file_id": "sent", "file_unique_id": "sent", "width": 1, "height": 1}]
        else:
            message["document"] = {"file_id": "sent", "file_unique_id": "sent",
                                   "file_name": upload["filename"]}
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
