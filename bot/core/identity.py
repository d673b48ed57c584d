"""Who is talking: the `Sender` value, the autonomy `Level`, and the stranger outcomes.

This is the only module that knows a sender's text form ("telegram:42": the channel, a colon,
the user id on that channel). Config keys and store rows keep that text (`str(sender)`); code
that needs a part of it parses it here, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Self

CHANNELS = ("cli", "telegram", "discord", "slack", "whatsapp")
# The `[senders]` keys the config accepts (a JSON-schema pattern).
SENDER_PATTERN = rf"^({'|'.join(CHANNELS)}):[^\s]+$"


@dataclass(frozen=True)
class Sender:
    channel: str    # "telegram", "discord", "cli"
    user_id: str    # the user's id on that channel ("local" on the terminal)

    @classmethod
    def parse(cls, text: str) -> Sender:
        """`Sender.parse("telegram:42")`; a ValueError names the expected form."""
        channel, colon, user_id = str(text).partition(":")
        if not colon or not channel or not user_id:
            raise ValueError(f"{text!r} is not a sender; expected channel:user_id, "
                             "e.g. telegram:123, discord:456 or cli:local")
        return cls(channel, user_id)

    @classmethod
    def of(cls, channel: str, user_id: object) -> str:
        """The text form of a sender built from a platform's user id."""
        return str(cls(channel, str(user_id)))

    @classmethod
    def of_text(cls, value: Sender | str) -> Sender:
        """The value of a sender given as a value or in its text form."""
        return value if isinstance(value, Sender) else cls.parse(value)

    @property
    def in_terminal(self) -> bool:
        """Typing in the bot's own terminal (where CLI-only tools are offered)."""
        return self.channel == "cli"

    @property
    def is_operator(self) -> bool:
        """The person who runs the bot: whoever types in its terminal (or signs in to its
        console) is at the machine, whatever the configured approvers."""
        return self.channel in OPERATOR_CHANNELS

    def __str__(self) -> str:
        return f"{self.channel}:{self.user_id}"


# The channels only the operator can reach: the local terminal and the web console's login.
OPERATOR_CHANNELS = frozenset({"cli", "console"})
OPERATOR = Sender("cli", "local")         # the terminal's one sender
CONSOLE_OPERATOR = Sender("console", "operator")


def is_operator(sender: Sender | str) -> bool:
    """`Sender.is_operator` for a sender in either form (a malformed one is not the operator)."""
    try:
        return Sender.of_text(sender).is_operator
    except ValueError:
        return False


def in_terminal(sender: Sender | str) -> bool:
    """`Sender.in_terminal` for a sender in either form (a malformed one is not)."""
    try:
        return Sender.of_text(sender).in_terminal
    except ValueError:
        return False


def channel_prefix(text: str) -> str:
    """What comes before the colon of something meant as a sender, even when it is not a valid
    one (for messages about a malformed config key)."""
    return str(text).partition(":")[0]


class Level(StrEnum):
    """A known sender's autonomy, ordered: read_only < supervised < full."""

    READ_ONLY = "read_only"
    SUPERVISED = "supervised"
    FULL = "full"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def __lt__(self, other: object) -> bool:
        return self.rank < Level(other).rank if isinstance(other, str) else NotImplemented

    def __le__(self, other: object) -> bool:
        return self.rank <= Level(other).rank if isinstance(other, str) else NotImplemented

    def __gt__(self, other: object) -> bool:
        return self.rank > Level(other).rank if isinstance(other, str) else NotImplemented

    def __ge__(self, other: object) -> bool:
        return self.rank >= Level(other).rank if isinstance(other, str) else NotImplemented

    @classmethod
    def parse(cls, value: str) -> Self:
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown level {value!r}; expected one of "
                             f"{', '.join(LEVELS)}") from None


LEVELS: tuple[str, ...] = tuple(level.value for level in Level)
_RANK = {level: rank for rank, level in enumerate(Level)}


class Stranger(StrEnum):
    """What happens to a sender without a level (`[senders] unknown`)."""

    PAIRING = "pairing"   # gets a one-time pairing code, nothing else
    IGNORE = "ignore"     # gets no answer at all


UNKNOWN_POLICIES: tuple[str, ...] = (*(s.value for s in Stranger), *LEVELS)
Access = Level | Stranger   # the result of looking a sender up


def parse_access(value: str) -> Access:
    """A `[senders] unknown` value: what happens to a stranger, or the level they get."""
    try:
        return Stranger(value)
    except ValueError:
        return Level.parse(value)
