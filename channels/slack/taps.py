"""A tap on a button: an approval answer, "Approve all" / "Deny all", or a command button.

The tap was acknowledged when it was stored (that is what stops Slack's spinner, within its 3
seconds); what follows runs after. An approval tap goes through the agent's compare-and-set:
when it counts, the agent redraws every message showing the request (this one, the approvers'
copies) without the buttons answered, so no button can be pressed twice; when it does not (a
stranger, a second tap, an expired or unknown request), the tapper alone is told why,
ephemerally, and nothing changes. A command button runs its command as a message typed by the
tapper, so it passes every check typing it would. A tap from another workspace changes nothing.
Whatever the tapper alone is told is in the tapper's language (Slack's payload names no locale,
so it is the language they chose, else the installation's).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from bot.core.events import AgentAPI, IncomingMessage
from bot.language.catalogs import N_
from channels.slack import texts
from channels.slack.approvals import parse_action
from channels.slack.batch import parse_batch_action
from channels.slack.reading import chat_of, parse_chat, sender_of
from channels.slack.sending import Poster
from channels.slack.sink import SlackSink, Target

log = logging.getLogger(__name__)

SinkFactory = Callable[[Target], SlackSink]
INVALID_BUTTON = N_("This button is not valid any more.")


def tap_of(body: dict[str, Any]) -> tuple[str, str, str, str | None, str] | None:
    """(user, channel, action id, thread ts, value) of a block_actions payload, or None."""
    actions = body.get("actions") or []
    user = (body.get("user") or {}).get("id")
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
    if not actions or not isinstance(user, str) or not isinstance(channel, str):
        return None
    action = actions[0]
    message = body.get("message") or {}
    thread = message.get("thread_ts") or (body.get("container") or {}).get("thread_ts")
    return (user, channel, str(action.get("action_id", "")), thread, str(action.get("value", "")))


class TapHandler:
    def __init__(self, poster: Poster, agent: AgentAPI, sink_for: SinkFactory, team_id: str,
                 channels: frozenset[str]):
        self._poster = poster
        self._agent = agent
        self._sink_for = sink_for
        self._team = team_id
        self._channels = channels

    def _ours(self, body: dict[str, Any]) -> bool:
        teams = ((body.get("team") or {}).get("id"), (body.get("user") or {}).get("team_id"))
        return all(team in (None, "", self._team) for team in teams) and bool(teams[0])

    async def approval(self, body: dict[str, Any]) -> None:
        tap = tap_of(body)
        if tap is None:
            return
        user, channel, action, thread, _ = tap
        resolver = sender_of(user)
        tr = self._agent.translator(resolver)     # the tapper reads the answer to their tap
        if not self._ours(body):
            await self._poster.ephemeral(channel, user, tr._(texts.WRONG_WORKSPACE),
                                         thread_ts=thread)
            return
        single, every = parse_action(action), parse_batch_action(action)
        if every is not None:
            resolution = await self._agent.resolve_batch(every[0], resolver, every[1])
        elif single is not None:
            resolution = await self._agent.resolve_approval(single[0], resolver, single[1])
        else:
            await self._poster.ephemeral(channel, user, tr._(INVALID_BUTTON), thread_ts=thread)
            return
        if not resolution.ok or resolution.request is None:
            await self._poster.ephemeral(channel, user, tr.say(resolution.reason), thread_ts=thread)
            return
        request = resolution.request
        # The conversation goes on where it was asked, whichever copy was tapped.
        asked = parse_chat(request.chat) if request.channel == "slack" else None
        where = asked or (channel, thread)
        sender = request.sender.partition(":")[2] if request.channel == "slack" else user
        target = Target(where[0], where[1], user_id=sender, team_id=self._team,
                        is_group=not where[0].startswith("D"))
        self._agent.resume_approval(resolution, self._sink_for(target))

    async def command(self, body: dict[str, Any], inbox_id: int | None) -> None:
        tap = tap_of(body)
        if tap is None:
            return
        user, channel, _, thread, command = tap
        tr = self._agent.translator(sender_of(user))
        if not self._ours(body) or not command.startswith("/"):
            await self._poster.ephemeral(channel, user, tr._(INVALID_BUTTON), thread_ts=thread)
            return
        is_dm = channel.startswith("D")
        if not is_dm and channel not in self._channels:
            await self._poster.ephemeral(channel, user, tr._(texts.NOT_HERE), thread_ts=thread)
            return
        target = Target(channel, thread, user_id=user, team_id=self._team, is_group=not is_dm)
        sink = self._sink_for(target)
        try:
            await self._agent.handle(IncomingMessage(
                sender=sender_of(user), chat=chat_of(channel, thread), text=command,
                channel="slack", is_group=not is_dm, inbox_id=inbox_id), sink)
        finally:
            await sink.close()
