"""The model: one client every call goes through, and a provider per kind of endpoint.

- client.py              the one gate: budget admission, fair slots, failover, degradation
- provider.py            the `Provider` protocol and the response values every provider returns
- models.py              `[models.<alias>]` and bare Anthropic ids → `ModelSpec`, fallbacks, keys
- capabilities.py        what a model can do: defaults per well-known provider, overridable
- degrade.py             a request fitted to a model: image placeholders, PDF text, no catalog
- anthropic_provider.py  the Anthropic Messages API (the reference); stream.py reads its events
- compat/              any OpenAI-compatible endpoint (provider, request, stream)
- errors.py              SDK errors → one line for the person, one for the log
- prompt.py              the request the runtime sends: system prompt, catalog, history

Imports bot.core, bot.config, bot.money (and bot.toolbox.offload, bot.store.audit where
used); each SDK only in its provider's module, imported when a configured model needs it.
"""
