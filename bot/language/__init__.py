"""The words the bot says to people, in their language: the message catalogs (gettext `.po`
sources in `locale/`, compiled to `.mo` by the install), the `Translator` a message is rendered
with (plural rules, CLDR dates, numbers and money through Babel), and the names of the
supported languages and how a platform's hint maps onto them.

Model-facing text (tool descriptions, the system prompt, wrapper lines) never goes through
here: it stays English. Deciding *which* language a person gets is `bot.access.languages`.

May import: core, config.
"""
