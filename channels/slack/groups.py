"""Slack user groups as roles: `[slack] groups = { "S012ABC" = "supervised" }` raises the level
of a user who is in the group (bot.access.senders maps the ids, as Discord's role names).

Only the configured groups are looked up (`usergroups.users.list`, scope `usergroups:read`),
and each member list is kept for `ttl` seconds, so a message costs no API call most of the time.
A group that cannot be read counts as empty: it grants nothing (never more than configured).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.sending import error_code

log = logging.getLogger(__name__)

DEFAULT_TTL = 300.0


class UserGroups:
    def __init__(self, client: AsyncWebClient, groups: Iterable[str], *, ttl: float = DEFAULT_TTL,
                 clock: Callable[[], float] = time.monotonic):
        self._client = client
        self._groups = tuple(groups)
        self._ttl = ttl
        self._clock = clock
        self._members: dict[str, tuple[float, frozenset[str]]] = {}

    async def of(self, user: str) -> tuple[str, ...]:
        """The configured groups `user` is in."""
        return tuple([group for group in self._groups if user in await self._users(group)])

    async def _users(self, group: str) -> frozenset[str]:
        cached = self._members.get(group)
        if cached is not None and self._clock() < cached[0]:
            return cached[1]
        try:
            answer = await self._client.usergroups_users_list(usergroup=group)
            users = frozenset(str(u) for u in answer.get("users", []))
        except SlackClientError as exc:
            log.warning("slack: cannot read user group %s (%s); it grants nothing", group,
                        error_code(exc))
            users = frozenset()
        self._members[group] = (self._clock() + self._ttl, users)
        return users
