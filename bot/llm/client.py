"""The one place every model call goes through, whichever provider answers it.

Every call names the sender it is made for: it passes the one gate for paid calls
(bot.money.gate), which checks their budget before it starts (refused calls raise
BudgetExceeded) and, for a single question (`ask`), records its cost right after. It waits
for a model slot shared fairly between senders (bot.money.fairshare; excess calls queue
instead of failing). Its usage
comes back on the response under one set of names, priced by bot.config.prices when the step is
stored (bot.conversation.journal), under the model that actually answered.

The model asked for is an alias or a bare Anthropic id (bot/llm/models.py). The request is
fitted to that model's capabilities (bot/llm/degrade.py) and handed to its provider
(bot/llm/provider.py). When the provider is overloaded, rate limiting, failing or too slow, the
next of `[agent] fallbacks` takes the same call — never once text has reached the person, so
nothing is said twice — and the person is told which model answered; an audit row records it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bot.config.settings import Config, model_names
from bot.core.errors import LLMError
from bot.core.events import valid_data, valid_text
from bot.llm.degrade import Degrader
from bot.llm.models import ANTHROPIC_KEY, Models, ModelSpec
from bot.llm.provider import Answer, LLMResponse, Provider, TextCallback
from bot.money.fairshare import FairSlots
from bot.money.gate import PaidCalls, Payer

__all__ = ["Answer", "LLMClient", "LLMResponse", "TextCallback"]

log = logging.getLogger(__name__)

ANSWERED_BY = "{failed} could not answer right now, so {model} answered instead."
# The system prompt and the tool catalog, roughly, beside the history in a model's context.
PROMPT_RESERVE_TOKENS = 6_000
MIN_HISTORY_BUDGET = 1_000
FailoverAudit = Callable[[str, str], Awaitable[None]]   # (sender, detail)


class LLMClient:
    def __init__(self, config: Config, client: Any = None, gate: PaidCalls | None = None,
                 audit: FailoverAudit | None = None, models: Models | None = None):
        """`client`: an `anthropic.AsyncAnthropic` for bare Anthropic ids (tests inject one);
        `gate`: the paid-call gate (None only for the operator's own probes, `myclaw models`);
        `audit`: how a failover is written to the audit log (bot.app wires it)."""
        agent = config["agent"]
        self._config = config
        self._gate = gate
        self._audit = audit
        self.models = models or Models(config)
        self._providers: dict[tuple[str, str, str], Provider] = {}
        self._anthropic_client = client
        self.degrader = Degrader()
        self.slots = FairSlots(agent["max_concurrent_llm_calls"],
                               config["rate_limits"]["max_share_of_model_slots"])
        self.stream_enabled: bool = agent["stream"]
        # The providers of the models the config names are built now, with their SDKs: at
        # start-up, inside the frozen long-lived heap (bot.app.long_lived_heap), not in a turn.
        for _, name in model_names(config):
            for spec in self.models.chain(name):
                self.provider(spec)

    def provider(self, spec: ModelSpec) -> Provider:
        """The provider for a model's endpoint, built on first use (and its SDK imported)."""
        provider = self._providers.get(spec.endpoint)
        if provider is None:
            provider = self._providers[spec.endpoint] = self._build(spec)
        return provider

    def _build(self, spec: ModelSpec) -> Provider:
        agent, config = self._config["agent"], self._config
        timeout, retries = agent["llm_timeout_seconds"], agent["llm_max_retries"]
        key = config.secret(spec.api_key_env)
        if spec.provider == "openai":
            from bot.llm.capabilities import is_local
            from bot.llm.compat.provider import OpenAIProvider

            return OpenAIProvider(base_url=spec.base_url, key=key, key_env=spec.api_key_env,
                                  key_required=not is_local(spec.base_url), caps=spec.capabilities,
                                  timeout=timeout, max_retries=retries)
        from bot.llm.anthropic_provider import AnthropicProvider

        default = spec.endpoint == ("anthropic", "", ANTHROPIC_KEY)
        return AnthropicProvider(key=key, key_env=spec.api_key_env,
                                 base_url=spec.base_url or config.anthropic_base_url,
                                 timeout=timeout, max_retries=retries,
                                 client=self._anthropic_client if default else None)

    async def close(self) -> None:
        for provider in self._providers.values():
            await provider.close()

    async def create(self, *, sender: str, level: str | None = None,
                     on_text: TextCallback | None = None, **params: Any) -> LLMResponse:
        """One model call made for `sender` (at autonomy `level`, which picks a per-level
        budget). Streams when enabled and `on_text` is given."""
        if self._gate is not None:
            await self._gate.admit(Payer(sender, level))
        return await self._complete(sender, on_text, params)

    async def _complete(self, sender: str, on_text: TextCallback | None,
                        params: dict[str, Any]) -> LLMResponse:
        """The call itself, once admitted."""
        chain = self.models.chain(params.get("model", "?"))
        streaming = on_text if self.stream_enabled else None
        async with self.slots.hold(sender):
            if len(chain) == 1:
                return await self._call(chain[0], params, streaming)
            return await self._with_fallbacks(sender, chain, params, streaming)

    async def _with_fallbacks(self, sender: str, chain: list[ModelSpec], params: dict[str, Any],
                              on_text: TextCallback | None) -> LLMResponse:
        said: list[str] = []

        async def passed_on(delta: str) -> None:
            said.append(delta)
            await on_text(delta)  # type: ignore[misc]

        failed: list[tuple[ModelSpec, LLMError]] = []
        for spec in chain:
            try:
                response = await self._call(spec, params, passed_on if on_text else None)
            except LLMError as error:
                if not error.retryable or spec is chain[-1] or said:
                    raise
                log.warning("model %s failed, trying the next fallback: %s", spec.alias, error)
                failed.append((spec, error))
                continue
            if failed:
                await self._failed_over(sender, failed, spec)
                note = ANSWERED_BY.format(failed=failed[0][0].alias, model=spec.alias)
                response.notices = (*response.notices, note)
            return response
        raise AssertionError("unreachable: the last model's error is raised")

    async def _failed_over(self, sender: str, failed: list[tuple[ModelSpec, LLMError]],
                           spec: ModelSpec) -> None:
        detail = "; ".join(f"{s.alias}: {e}"[:300] for s, e in failed)
        if self._audit is not None:
            await self._audit(sender, f"answered by {spec.alias} ({spec.model}) after {detail}")

    async def _call(self, spec: ModelSpec, params: dict[str, Any],
                    on_text: TextCallback | None) -> LLMResponse:
        caps = spec.capabilities
        if spec.model != params.get("model") or params.get("max_tokens", 0) > caps.max_output_tokens:
            params = {**params, "model": spec.model,
                      "max_tokens": min(params.get("max_tokens", 1024), caps.max_output_tokens)}
        params, notices = await self.degrader.fit(params, caps, spec.alias)
        stream = ValidTextStream(on_text) if on_text is not None else None
        response = await self.provider(spec).complete(params, None if stream is None else stream.send)
        if stream is not None:
            await stream.flush()
        # Where the model's words enter: an API may send lone surrogates (as JSON escapes), and
        # they must not reach a platform, a tool, the store or the next request as they are.
        return dataclasses.replace(response, content=valid_data(response.content),
                                   notices=(*response.notices, *notices))

    async def ask(self, *, sender: str, model: str, prompt: str, system: str = "",
                  max_tokens: int = 1024, level: str | None = None,
                  session_id: str = "") -> Answer:
        """A single question, no tools: for supra_llm, summaries and other side calls. Its
        cost is recorded under `session_id` before this returns."""
        params: dict[str, Any] = {"model": model, "max_tokens": max_tokens,
                                  "messages": [{"role": "user", "content": prompt}]}
        if system:
            params["system"] = system
        if self._gate is None:
            response = await self._complete(sender, None, params)
            return Answer(response.text, response.usage, response.model or model)
        async with self._gate.call(Payer(sender, level, session_id), "model") as bill:
            response = await self._complete(sender, None, params)
            if response.usage:   # an alias: the id that answered is the one priced
                bill.charge(response.model or model, usage=response.usage)
        return Answer(response.text, response.usage, response.model or model)

    def history_budget(self, model: str, configured: int, max_tokens: int) -> int:
        """How many tokens the history may grow to before it is compacted, for a turn on
        `model`: `[agent] context_budget_tokens`, or less when that model (or a fallback that
        may take its call) has a smaller context window, leaving room for its answer
        (`max_tokens`, at most what it can write) and for the system prompt and catalog."""
        room = min(caps.context_tokens - min(caps.max_output_tokens, max_tokens)
                   for caps in (spec.capabilities for spec in self.models.chain(model)))
        return max(MIN_HISTORY_BUDGET, min(configured, room - PROMPT_RESERVE_TOKENS))

    def tools_enabled(self, model: str) -> bool:
        """Does the model take tools (and so a catalog)? /whoami and /tools say when not."""
        return self.models.resolve(model).capabilities.tools


class ValidTextStream:
    """Streamed text passed on as valid text (bot.core.events.valid_text). A delta ending in
    the first half of a surrogate pair keeps it until the next delta, so a pair split between
    two deltas is joined as it is in the whole answer rather than shown as two U+FFFD."""

    def __init__(self, on_text: TextCallback):
        self._on_text = on_text
        self._held = ""

    async def send(self, delta: str) -> None:
        delta, self._held = self._held + delta, ""
        if delta and "\ud800" <= delta[-1] <= "\udbff":
            delta, self._held = delta[:-1], delta[-1]
        if delta:
            await self._on_text(valid_text(delta))

    async def flush(self) -> None:
        if self._held:
            held, self._held = self._held, ""
            await self._on_text(valid_text(held))


def audit_to(store: Any) -> FailoverAudit:
    """A failover's audit row, written to `store` (bot.store.audit)."""
    from bot.store.audit import AuditEntry, write_audit

    async def write(sender: str, detail: str) -> None:
        async with store.transaction(serial=False) as tx:
            await write_audit(tx, AuditEntry(sender=sender, decision="model",
                                             outcome="failover", detail=detail[:500]))
    return write
