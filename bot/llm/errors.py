"""SDK errors (after the SDK's own retries) as one actionable line for the user and one for the
operator's log (`str(error)`), the same on every provider.

Problems of the model account — out of credit, refused key or permissions, the provider's rate
limit, overload — are the operator's to fix or to wait out; the user is told what happened and
that their message is kept (the runtime stores it before the call), never to start over.

Both official SDKs (anthropic, openai) raise the same family of exceptions (`RateLimitError`,
`AuthenticationError`, `APITimeoutError`, … with `status_code`), so the error is read by its
class names and status without importing either SDK. `retryable` marks the errors another
model may take over (bot.llm.client's failover): overload, 5xx, rate limit, timeout, connection.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.errors import LLMError
from bot.language.catalogs import N_
from bot.language.phrase import Phrase

SAVED = N_("Your message is saved.")
CREDIT_MARKERS = ("credit balance", "billing", "spend limit", "payment", "insufficient_quota",
                  "exceeded your current quota")
CONTEXT_MARKERS = ("prompt is too long", "context length", "context_length_exceeded",
                   "maximum context", "context window")


@dataclass(frozen=True)
class Account:
    """Where the operator fixes the account of a model: its key variable and its console."""

    key_env: str = "ANTHROPIC_API_KEY"
    console: str = "the Anthropic console"
    billing: str = "Anthropic console, Plans & Billing"


ANTHROPIC = Account()


def translate(exc: BaseException, model: str, account: Account = ANTHROPIC) -> LLMError:
    """Turn an SDK error into an LLMError: user_message for the chat, str() for the log."""
    kinds = {cls.__name__ for cls in type(exc).__mro__}
    for check in (_account, _provider_busy, _request):
        error = check(exc, kinds, model, account)
        if error is not None:
            return error
    return LLMError(f"model API error: {exc}", Phrase("The model API failed. Please try again in "
                                                      "a moment."), retryable=True)


def _account(exc: BaseException, kinds: set[str], model: str, account: Account) -> LLMError | None:
    status = getattr(exc, "status_code", None)
    text = str(exc).lower()
    if status in (400, 402, 403, 429) and any(marker in text for marker in CREDIT_MARKERS):
        return LLMError(
            f"model account out of credit or over its spend limit: the operator must add credit "
            f"({account.billing}) or raise the limit: {exc}",
            Phrase("The bot's model account has run out of credit, so I cannot answer right now. "
                   "The operator has to add credit to the account. {saved}", saved=Phrase(SAVED)))
    if "AuthenticationError" in kinds:
        return LLMError(f"model API refused the key (401): check {account.key_env}: {exc}",
                        Phrase("The model API rejected the bot's API key. The operator has to "
                               "check {key}. {saved}", key=account.key_env, saved=Phrase(SAVED)))
    if "PermissionDeniedError" in kinds:
        return LLMError(
            f"permission denied (403) for model {model}: check the key's workspace and model "
            f"access in {account.console}: {exc}",
            Phrase("The bot's model account is not allowed to use '{model}'. The operator has to "
                   "check the API key's permissions. {saved}", model=model, saved=Phrase(SAVED)))
    return None


def _provider_busy(exc: BaseException, kinds: set[str], model: str,
                   account: Account) -> LLMError | None:
    if "RateLimitError" in kinds:
        return LLMError(
            f"rate limited by the provider (429) after retries: consider a higher usage tier or "
            f"a lower [agent] max_concurrent_llm_calls: {exc}",
            Phrase("The model provider is rate-limiting this bot right now. Please try again in a "
                   "minute. {saved}", saved=Phrase(SAVED)), retryable=True)
    status = getattr(exc, "status_code", None)
    if status == 529 or (status == 503 and "overload" in str(exc).lower()):
        return LLMError(f"provider overloaded ({status}) after retries: {exc}",
                        Phrase("The model is overloaded right now (a problem on the provider's "
                               "side). Please try again in a few minutes. {saved}",
                               saved=Phrase(SAVED)), retryable=True)
    return None


def _request(exc: BaseException, kinds: set[str], model: str, account: Account) -> LLMError | None:
    if "NotFoundError" in kinds:
        return LLMError(f"model not found: {model}: {exc}",
                        Phrase("The model '{model}' does not exist or is not available. The "
                               "operator should set [agent] model in the config to a valid model "
                               "id.", model=model))
    if "BadRequestError" in kinds:
        if any(marker in str(exc).lower() for marker in CONTEXT_MARKERS):
            return LLMError(f"context too long for model {model}: {exc}",
                            Phrase("This conversation is now too long for the model '{model}'. "
                                   "Send /new to start a fresh one. {saved}", model=model,
                                   saved=Phrase(SAVED)))
        return LLMError(f"bad request: {exc}", Phrase(
            "The model API rejected the request. If this keeps happening, send /new to start a "
            "fresh conversation."))
    if "APITimeoutError" in kinds:
        return LLMError(f"timeout: {exc}", Phrase("The model took too long to answer. Please "
                                                  "try again."), retryable=True)
    if "APIConnectionError" in kinds:
        return LLMError(f"connection failed: {exc}", Phrase(
            "I cannot reach the model API right now. Please try again in a moment."),
            retryable=True)
    return None
