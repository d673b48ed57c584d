"""Where the core sends messages nobody asked for just now: a scheduled job's answer, a note to
a job's owner. Each running channel registers an `Outlet` under its name; the core asks for a
sink by (channel name, chat, sender) and never learns anything about the platform.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from bot.core.events import Sink
from bot.core.identity import Sender


class Outlet(Protocol):
    def sink_for(self, chat: str, sender: str) -> Sink | None:
        """A sink posting into `chat` on behalf of a conversation with `sender`, or None when
        the chat cannot be reached (unknown id, the bot was removed)."""

    def private_sink_for(self, sender: str) -> Sink | None:
        """A sink reaching `sender` alone (a private chat or DM), or None."""


class Delivery:
    def __init__(self) -> None:
        self._outlets: dict[str, Outlet] = {}

    def register(self, channel: str, outlet: Outlet) -> None:
        self._outlets[channel] = outlet

    def unregister(self, channel: str) -> None:
        self._outlets.pop(channel, None)

    def sink(self, channel: str, chat: str, sender: str) -> Sink | None:
        outlet = self._outlets.get(channel)
        return outlet.sink_for(chat, sender) if outlet is not None else None

    def private(self, sender: str) -> Sink | None:
        """A sink reaching `sender` privately on their own channel, when it is running."""
        channel = Sender.parse(sender).channel
        outlet = self._outlets.get(channel)
        return outlet.private_sink_for(sender) if outlet is not None else None

    async def tell_privately(self, recipients: Iterable[str], events: Sequence[Any]) -> None:
        """Each recipient that can be reached privately gets `events`, in order."""
        for recipient in recipients:
            sink = self.private(recipient)
            if sink is None:
                continue
            try:
                for event in events:
                    await sink.emit(event)
            finally:
                close = getattr(sink, "close", None)
                if close is not None:
                    await close()

    @property
    def channels(self) -> list[str]:
        return sorted(self._outlets)
