"""A `Translator` renders the bot's words in one language: messages from the catalog (with
`{name}` placeholders and the language's plural rules), and dates, numbers and money in CLDR's
format for that language (Babel, imported on first use)."""

from __future__ import annotations

import gettext
from datetime import UTC, datetime
from functools import cache
from typing import Any

from bot.language.phrase import Amount, Day, Lines, Moment, Number, Phrase


@cache
def _zone(name: str) -> Any:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


class Translator:
    """One language, and the reader's time zone (times are shown in it unless told otherwise)."""

    def __init__(self, language: str, translations: gettext.NullTranslations, zone: str = "UTC"):
        self.language = language
        self.zone = zone
        self._translations = translations

    def at(self, zone: str) -> Translator:
        """The same language for a reader in `zone`."""
        return self if zone == self.zone else Translator(self.language, self._translations, zone)

    def _(self, message: str, /, **values: Any) -> str:
        """`message` in this language, its `{placeholders}` filled from `values`."""
        text = self._translations.gettext(message)
        return text.format(**values) if values else text

    def ngettext(self, singular: str, plural: str, count: int, /, **values: Any) -> str:
        """The form of a counted message this language uses for `count` (`{n}` is the count,
        written in the language's digits and separators)."""
        text = self._translations.ngettext(singular, plural, count)
        return text.format(n=self.number(count), **values)

    def say(self, text: str) -> str:
        """Any text for a person in this language: a `Phrase` is rendered from the catalog (its
        values too), anything else is content and shown as it is."""
        if not isinstance(text, Phrase):
            return text
        values = {name: self._value(value) for name, value in text.values.items()}
        if text.counted is not None:
            return self.ngettext(text.msgid, text.plural, text.counted, **values)
        return self._(text.msgid, **values)

    def _value(self, value: Any) -> Any:
        if isinstance(value, Phrase):
            return self.say(value)
        if isinstance(value, Moment):
            return self._moment(value)
        if isinstance(value, Amount):
            return self.money(value.value, value.currency)
        if isinstance(value, Number):
            return self.number(value.value)
        if isinstance(value, Day):
            from babel.dates import format_date

            moment = datetime.fromtimestamp(value.timestamp, _zone(value.zone))
            return format_date(moment, "medium", locale=self.language)
        if isinstance(value, Lines):
            return "\n".join(self.say(line) for line in value.lines)
        return value

    def _moment(self, value: Moment) -> str:
        zone = value.zone or self.zone
        if value.now is not None:
            day = datetime.fromtimestamp(value.timestamp, _zone(zone)).date()
            if day != datetime.fromtimestamp(value.now, _zone(zone)).date():
                return self.moment(value.timestamp, zone)
        return self.clock(value.timestamp, zone)

    def number(self, value: float) -> str:
        from babel.numbers import format_decimal

        return format_decimal(value, locale=self.language)

    def money(self, amount: float, currency: str = "USD") -> str:
        """An amount in `currency` as this language writes it ("$1.25", "1,25 USD")."""
        from babel.numbers import format_currency

        return format_currency(amount, currency, locale=self.language)

    def clock(self, timestamp: float, zone: str = "") -> str:
        """The time of day in `zone`, in this language's short format, with the zone's
        abbreviation ("3:40 PM CET", "15:40 CET")."""
        from babel.dates import format_time

        moment = datetime.fromtimestamp(timestamp, _zone(zone or self.zone))
        return f"{format_time(moment, 'short', locale=self.language)} {moment.strftime('%Z')}"

    def moment(self, timestamp: float, zone: str = "", *, seconds: bool = False) -> str:
        """Date and time in `zone` ("Dec 2, 2026, 3:40 PM CET", "2 dic 2026, 15:40 CET"; with
        `seconds`, "Dec 2, 2026, 3:40:07 PM CET")."""
        from babel import Locale
        from babel.dates import format_date, format_time

        moment = datetime.fromtimestamp(timestamp, _zone(zone or self.zone))
        joined = Locale.parse(self.language).datetime_formats["medium"]   # "{1}, {0}"
        clock = format_time(moment, "medium" if seconds else "short", locale=self.language)
        text = str(joined).format(clock,
                                  format_date(moment, "medium", locale=self.language))
        return f"{text} {moment.strftime('%Z')}"
