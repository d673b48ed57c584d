"""SDK errors (after the SDK's own retries) as one actionable line for the user and one for the
operator's log (`str(error)`).

Problems of the model account — out of credit, refused key or permissions, the provider's rate
limit, overload — are the operator's to fix or to wait out; the user is told what happened and
that their message is kept (the runtime stores it before the call), never to start over.
"""

from __future__ import annotations

import anthropic

from bot.core.errors import LLMError

SAVED = "Your message is saved."
CREDIT_MARKERS = ("credit balance", "billing", "spend limit", "payment")


def translate(exc: anthropic.APIError, model: str) -> LLMError:
    """Turn an SDK error into an LLMError: user_message for the chat, str() for the log."""
    for check in (_account, _provider_busy, _request):
        error = check(exc, model)
        if error is not None:
            return error
    return LLMError(f"model API error: {exc}", "The model API failed. Please try again in a "
                    "moment.", retryable=True)


def _account(exc: anthropic.APIError, model: str) -> LLMError | None:
    status = getattr(exc, "status_code", None)
    text = str(exc).lower()
    if status in (400, 402, 403) and any(marker in text for marker in CREDIT_MARKERS):
        return LLMError(
            f"model account out of credit or over its spend limit: the operator must add credit "
            f"(Anthropic console, Plans & Billing) or raise the limit: {exc}",
            "The bot's model account has run out of credit, so I cannot answer right now. The "
            f"operator has to add credit to the account. {SAVED}")
    if isinstance(exc, anthropic.AuthenticationError):
        return LLMError(f"model API refused the key (401): check ANTHROPIC_API_KEY: {exc}",
                        "The model API rejected the bot's API key. The operator has to check "
                        f"ANTHROPIC_API_KEY. {SAVED}")
    if isinstance(exc, anthropic.PermissionDeniedError):
        return LLMError(
            f"permission denied (403) for model {model}: check the key's workspace and model "
            f"access in the Anthropic console: {exc}",
            f"The bot's model account is not allowed to use '{model}'. The operator has to "
            f"check the API key's permissions. {SAVED}")
    return None


def _provider_busy(exc: anthropic.APIError, model: str) -> LLMError | None:
    if isinstance(exc, anthropic.RateLimitError):
        return LLMError(
            f"rate limited by the provider (429) after retries: consider a higher usage tier or "
            f"a lower [agent] max_concurrent_llm_calls: {exc}",
            f"The model provider is rate-limiting this bot right now. Please try again in a "
            f"minute. {SAVED}", retryable=True)
    if isinstance(exc, anthropic.APIStatusError) and exc.status_code == 529:
        return LLMError(f"provider overloaded (529) after retries: {exc}",
                        "The model is overloaded right now (a problem on the provider's side). "
                        f"Please try again in a few minutes. {SAVED}", retryable=True)
    return None


def _request(exc: anthropic.APIError, model: str) -> LLMError | None:
    if isinstance(exc, anthropic.NotFoundError):
        return LLMError(f"model not found: {model}: {exc}",
                        f"The model '{model}' does not exist or is not available. The operator "
                        "should set [agent] model in the config to a valid model id.")
    if isinstance(exc, anthropic.BadRequestError):
        return LLMError(f"bad request: {exc}", "The model API rejected the request. If this "
                        "keeps happening, send /new to start a fresh conversation.")
    if isinstance(exc, anthropic.APITimeoutError):
        return LLMError(f"timeout: {exc}", "The model took too long to answer. Please try "
                        "again.", retryable=True)
    if isinstance(exc, anthropic.APIConnectionError):
        return LLMError(f"connection failed: {exc}", "I cannot reach the model API right now. "
                        "Please try again in a moment.", retryable=True)
    return None
