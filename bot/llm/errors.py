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

SAVED = "Your message is saved."
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
    return LLMError(f"model API error: {exc}", "The model API failed. Please try again in a "
                    "moment.", retryable=True)


def _account(exc: BaseException, kinds: set[str], model: str, account: Account) -> LLMError | None:
    status = getattr(exc, "status_code", None)
    text = str(exc).lower()
    if status in (400, 402, 403, 429) and any(marker in text for marker in CREDIT_MARKERS):
        return LLMError(
            f"model account out of credit or over its spend limit: the operator must add credit "
            f"({account.billing}) or raise the limit: {exc}",
            "The bot's model account has run out of credit, so I cannot answer right now. The "
            f"operator has to add credit to the account. {SAVED}")
    if "AuthenticationError" in kinds:
        return LLMError(f"model API refused the key (401): check {account.key_env}: {exc}",
                        "The model API rejected the bot's API key. The operator has to check "
                        f"{account.key_env}. {SAVED}")
    if "PermissionDeniedError" in kinds:
        return LLMError(
            f"permission denied (403) for model {model}: check the key's workspace and model "
            f"access in {account.console}: {exc}",
            f"The bot's model account is not allowed to use '{model}'. The operator has to "
            f"check the API key's permissions. {SAVED}")
    return None


def _provider_busy(exc: BaseException, kinds: set[str], model: str,
                   account: Account) -> LLMError | None:
    if "RateLimitError" in kinds:
        return LLMError(
            f"rate limited by the provider (429) after retries: consider a higher usage tier or "
            f"a lower [agent] max_concurrent_llm_calls: {exc}",
            f"The model provider is rate-limiting this bot right now. Please try again in a "
            f"minute. {SAVED}", retryable=True)
    status = getattr(exc, "status_code", None)
    if status == 529 or (status == 503 and "overload" in str(exc).lower()):
        return LLMError(f"provider overloaded ({status}) after retries: {exc}",
                        "The model is overloaded right now (a problem on the provider's side). "
                        f"Please try again in a few minutes. {SAVED}", retryable=True)
    return None


def _request(exc: BaseException, kinds: set[str], model: str, account: Account) -> LLMError | None:
    if "NotFoundError" in kinds:
        return LLMError(f"model not found: {model}: {exc}",
                        f"The model '{model}' does not exist or is not available. The operator "
                        "should set [agent] model in the config to a valid model id.")
    if "BadRequestError" in kinds:
        if any(marker in str(exc).lower() for marker in CONTEXT_MARKERS):
            return LLMError(f"context too long for model {model}: {exc}",
                            f"This conversation is now too long for the model '{model}'. Send "
                            f"/new to start a fresh one. {SAVED}")
        return LLMError(f"bad request: {exc}", "The model API rejected the request. If this "
                        "keeps happening, send /new to start a fresh conversation.")
    if "APITimeoutError" in kinds:
        return LLMError(f"timeout: {exc}", "The model took too long to answer. Please try "
                        "again.", retryable=True)
    if "APIConnectionError" in kinds:
        return LLMError(f"connection failed: {exc}", "I cannot reach the model API right now. "
                        "Please try again in a moment.", retryable=True)
    return None
