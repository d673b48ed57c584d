"""Posting, updating and uploading on Slack so that a reply is never dropped.

Every message goes out formatted first (mrkdwn, and Block Kit blocks where it has them); when
Slack refuses that form (`invalid_blocks`, `msg_too_long`, …) the same part is sent again as
plain text without blocks — for an approval card, the plain twin names the /approve and /deny
commands. Rate limits (429 with Retry-After) and dropped connections are retried by the SDK's
own retry handlers, installed on the client (`web_client`). What still fails becomes a
`DeliveryError`, which the sink logs instead of breaking the agent's turn.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.rendering import Part, split_message

log = logging.getLogger(__name__)

RATE_LIMIT_RETRIES = 5
CONNECTION_RETRIES = 2
# Refusals that no other form of the same message would get past.
_NOT_THE_FORM = frozenset({"channel_not_found", "not_in_channel", "is_archived", "invalid_auth",
                           "account_inactive", "token_revoked", "ratelimited", "user_not_found",
                           "missing_scope", "message_not_found", "cant_update_message"})
MAX_DM_CACHE = 10_000


class DeliveryError(Exception):
    """A message could not be delivered even after the fallbacks."""


def web_client(token: str, base_url: str, *, timeout: float = 30.0) -> AsyncWebClient:
    """The Web API client every part of the channel shares, with the SDK's retry handlers:
    429 waits as long as Retry-After says, then tries again (never a lost reply). It keeps one
    aiohttp session (its connections are reused; without one the SDK opens a session, hence a
    TCP and TLS handshake, for every call): the owner closes `client.session`. Call it inside
    the event loop."""
    base = base_url if base_url.endswith("/") else f"{base_url}/"
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout))
    client = AsyncWebClient(token=token, base_url=base, timeout=int(timeout), session=session)
    client.retry_handlers.extend([
        AsyncRateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
        AsyncServerErrorRetryHandler(max_retry_count=CONNECTION_RETRIES),
    ])
    for handler in client.retry_handlers:
        if isinstance(handler, AsyncConnectionErrorRetryHandler):
            handler.max_retry_count = CONNECTION_RETRIES
    return client


def error_code(exc: Exception) -> str:
    data = exc.response.data if isinstance(exc, SlackApiError) else None
    if isinstance(data, dict):
        return str(data.get("error", "unknown"))
    if isinstance(exc, SlackApiError):
        return f"HTTP {exc.response.status_code}"
    return type(exc).__name__


class Poster:
    """The delivery rules every Slack message needs, over one `AsyncWebClient`."""

    def __init__(self, client: AsyncWebClient):
        self.client = client
        self._dms: dict[str, str] = {}

    async def post(self, channel: str, part: Part, *, thread_ts: str | None = None,
                   blocks: Sequence[dict[str, Any]] | None = None) -> str:
        """Send one message; its ts."""
        common: dict[str, Any] = {"channel": channel, "thread_ts": thread_ts,
                                  "unfurl_links": False, "unfurl_media": False}
        try:
            try:
                answer = await self.client.chat_postMessage(text=part.mrkdwn, blocks=blocks,
                                                            **common)
            except SlackApiError as exc:
                if error_code(exc) in _NOT_THE_FORM:
                    raise
                log.info("slack refused the formatted message (%s); sending plain text",
                         error_code(exc))
                answer = await self.client.chat_postMessage(text=part.plain, mrkdwn=False,
                                                            **common)
        except SlackClientError as exc:
            raise DeliveryError(f"slack chat.postMessage failed: {error_code(exc)}") from exc
        return str(answer["ts"])

    async def post_markdown(self, channel: str, markdown: str, *, thread_ts: str | None = None,
                            buttons: Sequence[dict[str, Any]] = ()) -> list[str]:
        """A model answer: converted, split, each part with its fallback; `buttons` (an
        actions block's elements) go under the last part."""
        parts = split_message(markdown)
        sent = []
        for index, part in enumerate(parts):
            blocks = None
            if buttons and index == len(parts) - 1:
                blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": part.mrkdwn}},
                          {"type": "actions", "elements": list(buttons)}]
            sent.append(await self.post(channel, part, thread_ts=thread_ts, blocks=blocks))
        return sent

    async def update(self, channel: str, ts: str, part: Part, *,
                     blocks: Sequence[dict[str, Any]] | None = None) -> None:
        """Replace a message's text (and blocks: `[]` removes them, buttons included)."""
        try:
            try:
                await self.client.chat_update(channel=channel, ts=ts, text=part.mrkdwn,
                                              blocks=blocks)
            except SlackApiError as exc:
                if error_code(exc) in _NOT_THE_FORM:
                    raise
                log.info("slack refused the formatted update (%s); sending plain text",
                         error_code(exc))
                await self.client.chat_update(channel=channel, ts=ts, text=part.plain,
                                              blocks=[], parse="none")
        except SlackClientError as exc:
            raise DeliveryError(f"slack chat.update failed: {error_code(exc)}") from exc

    async def ephemeral(self, channel: str, user: str, text: str, *,
                        thread_ts: str | None = None) -> None:
        """A line only `user` sees (a tap they may not make); best effort."""
        try:
            await self.client.chat_postEphemeral(channel=channel, user=user, text=text,
                                                 thread_ts=thread_ts)
        except SlackClientError as exc:
            log.warning("slack: could not tell %s ephemerally (%s)", user, error_code(exc))

    async def dm(self, user: str) -> str:
        """The id of the bot's DM with `user` (opened once, remembered)."""
        known = self._dms.get(user)
        if known is not None:
            return known
        try:
            answer = await self.client.conversations_open(users=user)
        except SlackClientError as exc:
            raise DeliveryError(f"slack conversations.open failed: {error_code(exc)}") from exc
        channel = str(answer["channel"]["id"])
        if len(self._dms) >= MAX_DM_CACHE:
            self._dms.clear()
        self._dms[user] = channel
        return channel

    async def upload(self, channel: str, name: str, data: bytes, *, thread_ts: str | None = None,
                     title: str = "", comment: str = "", snippet_type: str = "") -> None:
        """A file into the conversation (files.getUploadURLExternal, the upload,
        files.completeUploadExternal: the SDK's files_upload_v2)."""
        extra: dict[str, Any] = {"snippet_type": snippet_type} if snippet_type else {}
        try:
            await self.client.files_upload_v2(channel=channel, thread_ts=thread_ts, content=None,
                                              file=data, filename=name, title=title or name,
                                              initial_comment=comment or None,
                                              request_file_info=False, **extra)
        except SlackClientError as exc:
            raise DeliveryError(f"slack file upload failed: {error_code(exc)}") from exc
