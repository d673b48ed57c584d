"""The language each person gets — decided here and nowhere else (`language_of`):

1. the one they chose with `/language it|es|en` (stored per sender),
2. else the platform's hint: Telegram's `language_code`, a Discord interaction's locale or the
   guild's preferred locale, Slack's locale of the person, the terminal's `LANG` (the last hint
   seen is remembered, so an approver's copy of someone else's request is in the approver's
   language too); WhatsApp gives none (and a phone number's country code is not taken as one),
3. else `[agent] language` (default `en`).

Both stored values (and each person's time zone, which times are shown in) are read once at
start (`load`) and kept in memory, so resolving a language costs a dictionary look-up per
message; a hint is written only when it changes.
"""

from __future__ import annotations

from bot.access.preferences import Preferences
from bot.language.catalogs import translator
from bot.language.names import DEFAULT, supported
from bot.language.translator import Translator

AUTO = "auto"


class Languages:
    def __init__(self, preferences: Preferences, default: str = DEFAULT,
                 default_zone: str = "UTC"):
        self.preferences = preferences
        self.default = supported(default) or DEFAULT
        self.default_zone = default_zone
        self._chosen: dict[str, str] = {}
        self._hints: dict[str, str] = {}
        self._zones: dict[str, str] = {}

    async def load(self) -> None:
        for row in await self.preferences.everyone():
            for kept, value in ((self._chosen, row["language"]), (self._hints, row["language_hint"]),
                                (self._zones, row["timezone"])):
                if value:
                    kept[row["sender"]] = value

    def language_of(self, sender: str, hint: str = "") -> str:
        """The one resolver: `sender`'s choice, else the platform's hint (this message's, else
        the last one remembered), else the configured default."""
        chosen = self._chosen.get(sender)
        if chosen:
            return chosen
        return supported(hint or self._hints.get(sender, "")) or self.default

    def translator(self, sender: str, hint: str = "") -> Translator:
        """How `sender` reads the bot: their language, times in their time zone."""
        return translator(self.language_of(sender, hint)).at(
            self._zones.get(sender, self.default_zone))

    def chosen(self, sender: str) -> str:
        """The language `sender` chose ("" when they left it to the platform)."""
        return self._chosen.get(sender, "")

    def zone_changed(self, sender: str, zone: str) -> None:
        """`sender` set a time zone (stored in their preferences): times follow it."""
        self._zones[sender] = zone

    async def heard(self, sender: str, hint: str) -> None:
        """Remember the platform's hint for `sender` (written only when it changed)."""
        hint = supported(hint)
        if not hint or self._hints.get(sender) == hint:
            return
        await self.preferences.set_language_hint(sender, hint)
        self._hints[sender] = hint

    async def choose(self, sender: str, language: str) -> str:
        """Store `sender`'s choice (`auto` clears it); the language they now get."""
        if language == AUTO:
            await self.preferences.set_language(sender, None)
            self._chosen.pop(sender, None)
        else:
            chosen = supported(language)
            if not chosen:
                raise ValueError(language)
            await self.preferences.set_language(sender, chosen)
            self._chosen[sender] = chosen
        return self.language_of(sender)
