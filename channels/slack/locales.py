"""Each person's Slack language as the platform's hint (`[slack] locale_hint`, on by default).

Slack sends no locale with a message; `users.info` with `include_locale` has it ("es-ES"),
scope `users:read`. It is asked once per person and process, the answer (or its absence: the
scope not granted, an error) kept in a table bounded by count, so a message costs no API call
after a person's first. The hint only decides until the person picks a language (/language).
"""

from __future__ import annotations

import logging
from collections import OrderedDict

import aiohttp
from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.sending import error_code

log = logging.getLogger(__name__)

MAX_PEOPLE = 4096


class UserLocales:
    def __init__(self, client: AsyncWebClient, *, limit: int = MAX_PEOPLE):
        self._client = client
        self._limit = limit
        self._known: OrderedDict[str, str] = OrderedDict()

    async def of(self, user: str) -> str:
        """`user`'s Slack locale ("" when Slack does not say)."""
        if user in self._known:
            self._known.move_to_end(user)
            return self._known[user]
        try:
            answer = await self._client.users_info(user=user, include_locale=True)
            person = answer.get("user")
            found = person.get("locale") if isinstance(person, dict) else None
            locale = found[:35] if isinstance(found, str) else ""
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            log.info("slack: no locale for %s (%s); their language is the default until they "
                     "choose one", user, error_code(exc))
            locale = ""
        self._known[user] = locale
        while len(self._known) > self._limit:
            self._known.popitem(last=False)
        return locale
