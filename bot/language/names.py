"""The languages the bot speaks and how a platform's hint ("it", "es-419", "en_US.UTF-8",
"pt-BR") maps onto one of them."""

from __future__ import annotations

SUPPORTED = ("en", "it", "es")
DEFAULT = "en"
SOURCE = "en"   # the language the messages are written in
# Each language named in itself: what /language lists.
NATIVE_NAMES = {"en": "English", "it": "Italiano", "es": "Español"}
# Each language named in English: what the (English) system prompt tells the model.
ENGLISH_NAMES = {"en": "English", "it": "Italian", "es": "Spanish"}


def supported(hint: str | None) -> str:
    """The supported language a hint names ("" when it names none): a Telegram
    `language_code`, a Discord locale, an Accept-Language tag or a POSIX `LANG` value."""
    if not hint:
        return ""
    base = hint.strip().split(".", 1)[0].replace("_", "-").split("-", 1)[0].lower()
    return base if base in SUPPORTED else ""


def from_accept_language(header: str | None) -> str:
    """The first supported language of an Accept-Language header, by its q weights."""
    ranked: list[tuple[float, int, str]] = []
    for index, item in enumerate((header or "").split(",")):
        tag, _, params = item.strip().partition(";")
        weight = 1.0
        if params.strip().startswith("q="):
            try:
                weight = float(params.strip()[2:])
            except ValueError:
                continue
        language = supported(tag)
        if language and weight > 0:
            ranked.append((-weight, index, language))
    return min(ranked)[2] if ranked else ""


def terminal_language(env: dict[str, str] | object) -> str:
    """The language a terminal's environment names: LC_ALL, else LC_MESSAGES, else LANG (as
    gettext reads them); "" for none, "C" or "POSIX"."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(name, "") if hasattr(env, "get") else ""
        if value and value not in ("C", "POSIX") and not value.startswith("C."):
            return value
    return ""
