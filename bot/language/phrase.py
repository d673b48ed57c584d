"""Words for a person, made before anyone knows who will read them.

A `Phrase` is a `str` (its English text: what logs, audit rows and older callers see) that also
keeps its catalog message id and values, so a channel renders it in each reader's language
(`Translator.say`). A value may itself be a Phrase, a `Moment` (shown in the reader's format and
the given zone), a `Number`, `Lines` of Phrases or an `Amount` of money (the reader's number
format, the budget's currency).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Moment:
    """A time of day, shown in `zone` ("" = the reader's own time zone); with the date too when
    it is not the day of `now` (when given)."""

    timestamp: float
    zone: str = ""
    now: float | None = None

    def __str__(self) -> str:
        from datetime import datetime
        from zoneinfo import ZoneInfo

        zone = ZoneInfo(self.zone or "UTC")
        moment = datetime.fromtimestamp(self.timestamp, zone)
        other_day = self.now is not None and \
            moment.date() != datetime.fromtimestamp(self.now, zone).date()
        return moment.strftime("%Y-%m-%d %H:%M %Z" if other_day else "%H:%M %Z")


@dataclass(frozen=True)
class Day:
    """A calendar day in `zone` ("1 Jan 2027"; the reader's format when rendered)."""

    timestamp: float
    zone: str = "UTC"

    def __str__(self) -> str:
        from datetime import datetime
        from zoneinfo import ZoneInfo

        day = datetime.fromtimestamp(self.timestamp, ZoneInfo(self.zone))
        return f"{day.day} {day:%b %Y}"


@dataclass(frozen=True)
class Number:
    value: float

    def __str__(self) -> str:
        return f"{self.value:,}"


@dataclass(frozen=True)
class Amount:
    value: float
    currency: str = "USD"

    def __str__(self) -> str:
        return f"{self.value:,.2f} {self.currency}"


@dataclass(frozen=True)
class Lines:
    """Several Phrases shown one per line (each rendered in the reader's language)."""

    lines: tuple[str, ...]

    def __init__(self, lines: Any):
        object.__setattr__(self, "lines", tuple(lines))

    def __str__(self) -> str:
        return "\n".join(self.lines)


class Phrase(str):
    msgid: str
    plural: str
    counted: int | None   # not `count`: that is str.count, which a Phrase keeps
    values: dict[str, Any]

    def __new__(cls, msgid: str, /, *, plural: str = "", count: int | None = None,
                **values: Any) -> Phrase:
        chosen = plural if plural and count != 1 else msgid
        english = chosen.format(n=count, **values) if count is not None else (
            chosen.format(**values) if values else chosen)
        self = super().__new__(cls, english)
        self.msgid, self.plural, self.counted, self.values = msgid, plural, count, values
        return self

    def __reduce__(self) -> Any:   # pickles and copies keep the message, not just its English
        return (_rebuild, (self.msgid, self.plural, self.counted, self.values))


def _rebuild(msgid: str, plural: str, count: int | None, values: dict[str, Any]) -> Phrase:
    return Phrase(msgid, plural=plural, count=count, **values)


def plural_phrase(singular: str, plural: str, count: int, /, **values: Any) -> Phrase:
    """A counted Phrase (`{n}` is the count): each language picks its own plural form."""
    return Phrase(singular, plural=plural, count=count, **values)


def size_phrase(size: int) -> Phrase:
    """A file size for a person ("1.5 MB", "300 KB"), its figure in the reader's number format
    ("1,5 MB" in Italian) when the Phrase is rendered."""
    if size >= 1_000_000:
        return Phrase("{n} MB", n=Number(round(size / 1_000_000, 1)))
    return Phrase("{n} KB", n=Number(round(size / 1000)))

# --- stored: a Phrase kept in the store, to be rendered again later (after a restart) ------

_KINDS: dict[str, type] = {"moment": Moment, "day": Day, "number": Number, "amount": Amount}


def phrase_data(value: Any) -> Any:
    """`value` as JSON-able data that `phrase_from` turns back into it: a Phrase keeps its
    message and values, Lines their lines; plain text and numbers stay as they are."""
    if isinstance(value, Phrase):
        data: dict[str, Any] = {"msgid": value.msgid,
                                "values": {k: phrase_data(v) for k, v in value.values.items()}}
        if value.plural:
            data["plural"], data["count"] = value.plural, value.counted
        return data
    if isinstance(value, Lines):
        return {"lines": [phrase_data(line) for line in value.lines]}
    for kind, cls in _KINDS.items():
        if isinstance(value, cls):
            return {kind: dict(value.__dict__)}
    if isinstance(value, str | int | float) or value is None:
        return str(value) if isinstance(value, str) else value
    return str(value)


def phrase_from(data: Any) -> Any:
    """The value `phrase_data` made (anything it does not recognise comes back as text)."""
    if not isinstance(data, dict):
        return data
    if isinstance(data.get("msgid"), str):
        values = data.get("values") if isinstance(data.get("values"), dict) else {}
        try:
            return Phrase(data["msgid"], plural=str(data.get("plural") or ""),
                          count=data.get("count"),
                          **{str(k): phrase_from(v) for k, v in values.items()})
        except (KeyError, IndexError, ValueError, TypeError):
            return data["msgid"]   # a message whose placeholders changed since it was stored
    if isinstance(data.get("lines"), list):
        return Lines(phrase_from(line) for line in data["lines"])
    for kind, cls in _KINDS.items():
        if isinstance(data.get(kind), dict):
            try:
                return cls(**data[kind])
            except TypeError:
                break
    return str(data)


def stored_words(value: str) -> str | None:
    """What keeps `value`'s words as a message in a store column (None: it is plain text)."""
    import json

    return json.dumps(phrase_data(value), ensure_ascii=False) if isinstance(value, Phrase) \
        else None


def words_of(data: str | None, text: str) -> str:
    """A stored text as a Phrase again when its words were kept (`stored_words`), else the text.
    The text is what was shown and checked: a kept message that no longer renders to it (it
    was scrubbed, or cut) is not used."""
    import json

    if data:
        try:
            words = phrase_from(json.loads(data))
        except ValueError:
            words = None
        if isinstance(words, Phrase) and str(words) == text:
            return words
    return text
