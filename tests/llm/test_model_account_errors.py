"""Problems of the model account (credit, key permissions, the provider's rate limit, overload)
each get their own one-line message for the user and the operator's log; the user's message
stays in the history."""

from __future__ import annotations

import logging

import pytest

from bot.core.events import ErrorEvent
from tests.fakes.anthropic_server import error
from tests.runtime.test_runtime import message, say
from tests.support.providers import OPENAI_KEY_ENV, PROVIDERS, model_id

CREDIT = ("Your credit balance is too low to access the Anthropic API. Please go to Plans & "
          "Billing to upgrade or purchase credits.")


async def failure_of(app_factory, fake_anthropic, caplog, reply) -> tuple[str, str]:
    app = await app_factory({"agent": {"llm_max_retries": 0}})
    fake_anthropic.script(reply)
    with caplog.at_level(logging.WARNING, logger="bot.runtime.agent"):
        sink = await say(app, "please keep this")
    (failure,) = sink.of(ErrorEvent)
    session = await app.agent.session_id(message("x"))
    history, _ = await app.agent.journal.stored(session)
    assert history[-1]["content"][0]["text"] == "please keep this"  # nothing is lost
    logged = "\n".join(r.getMessage() for r in caplog.records if "model call failed" in r.getMessage())
    return failure.message, logged


@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_an_account_out_of_credit_gets_the_billing_message_not_new(app_factory,
                                                                         fake_model, caplog,
                                                                         provider_name):
    said, logged = await failure_of(app_factory, fake_model, caplog,
                                    error(400, "invalid_request_error", CREDIT))
    assert said.startswith("The bot's model account has run out of credit")
    assert "operator has to add credit" in said and "/new" not in said
    assert "Your message is saved." in said and "\n" not in said
    billing = "Plans & Billing" if provider_name == "anthropic" else "billing page (127.0.0.1)"
    assert "out of credit" in logged and billing in logged


KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": OPENAI_KEY_ENV}


@pytest.mark.parametrize(("reply", "user_says", "log_says"), [
    (error(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute "
           "rate limit"), "rate-limiting this bot right now", "rate limited by the provider (429)"),
    (error(529, "overloaded_error", "Overloaded"), "The model is overloaded right now",
     "provider overloaded (529)"),
    (error(403, "permission_error", "Your API key does not have permission to use the "
           "specified resource."), "is not allowed to use '{model}'",
     "permission denied (403)"),
    (error(401, "authentication_error", "invalid x-api-key"), "{key_env}",
     "check {key_env}"),
    (error(404, "not_found_error", "model: gone"), "The model '{model}' does not exist",
     "model not found"),
    (error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
     "too long for the model '{model}'. Send /new", "context too long"),
], ids=["provider-rate-limit", "overloaded", "permission", "bad-key", "unknown-model",
        "context-too-long"])
@pytest.mark.parametrize("provider_name", PROVIDERS)
async def test_each_account_problem_has_its_own_line_for_the_user_and_the_log(
        app_factory, fake_model, caplog, reply, user_says, log_says, provider_name):
    said, logged = await failure_of(app_factory, fake_model, caplog, reply)
    names = {"model": model_id(provider_name), "key_env": KEY_ENV[provider_name]}
    assert user_says.format(**names) in said and "\n" not in said
    assert "/new" not in said or "too long" in said
    assert log_says.format(**names) in logged
