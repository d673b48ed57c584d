"""`myclaw models` lists what the config can use; `myclaw doctor` checks the keys the used
models need, and with `--online` asks each model a one-token question and whether it takes
tools (real SDKs, fake endpoints on 127.0.0.1)."""

from __future__ import annotations

import io

import pytest

from bot.ops.cli.doctor import run_doctor
from bot.ops.cli.models import _models_command
from tests.conftest import FAKE_ENV, make_config
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, error, text

LOCAL = {"provider": "openai", "base_url": "http://127.0.0.1:11434/v1", "model": "qwen3:14b"}


def lines_of(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


async def test_models_lists_aliases_and_the_bare_ids_in_use_with_capabilities_and_prices(tmp_path):
    config = make_config(tmp_path, {"models": {"local": LOCAL}, "agent": {"small_model": "local"}})
    out = io.StringIO()
    assert await _models_command(None, config, out) == 0
    text_ = out.getvalue()
    assert "local: openai qwen3:14b  (used as [agent] small_model)" in text_
    assert "claude-sonnet-5-5: anthropic claude-sonnet-5-5  (used as [agent] model)" in text_
    assert "can: tools; prompt caching none; context 32,768 tokens" in text_
    assert "input 0, output 0" in text_ and "input 3, output 15" in text_
    assert "sk-test" not in text_          # key values are never printed


async def test_doctor_asks_for_a_remote_models_key_but_not_for_a_local_ones(tmp_path):
    env = {k: v for k, v in FAKE_ENV.items() if k != "ANTHROPIC_API_KEY"}
    remote = {"provider": "openai", "model": "gpt-4.1"}
    config = make_config(tmp_path, {"models": {"local": LOCAL, "gpt": remote},
                                    "agent": {"model": "local", "small_model": "gpt",
                                              "supra_model": "local"}}, env=env)
    out = io.StringIO()
    assert await run_doctor(config, out=out) == 1
    (key,) = [line for line in lines_of(out) if "_API_KEY:" in line and "BRAVE" not in line]
    assert key == "FAIL OPENAI_API_KEY: not set: needed to chat on any channel (for gpt)"


async def test_a_key_only_supra_llm_needs_is_a_warning_not_a_failure(tmp_path):
    env = {k: v for k, v in FAKE_ENV.items() if k != "ANTHROPIC_API_KEY"}
    config = make_config(tmp_path, {"models": {"local": LOCAL},
                                    "agent": {"model": "local", "small_model": "local"}}, env=env)
    out = io.StringIO()
    assert await run_doctor(config, out=out) == 0
    (key,) = [line for line in lines_of(out) if line.split()[1] == "ANTHROPIC_API_KEY:"]
    assert key.startswith("warn ANTHROPIC_API_KEY: not set: supra_llm cannot use its model")


@pytest.fixture
async def endpoints():
    async with FakeOpenAI() as local, FakeAnthropic() as anthropic_:
        yield local, anthropic_


async def test_doctor_online_asks_each_model_and_says_which_refuse_tools(tmp_path, endpoints):
    local, anthropic_ = endpoints

    def refuses_tools(body):
        if "tools" in body:
            return error(400, "invalid_request_error", "qwen-tiny does not support tools")
        return text("ok")
    local.responder = refuses_tools
    config = make_config(tmp_path, {
        "models": {"tiny": {**LOCAL, "base_url": local.api_url, "model": "qwen-tiny"}},
        "agent": {"small_model": "tiny", "llm_max_retries": 0}},
        env={**FAKE_ENV, "ANTHROPIC_BASE_URL": anthropic_.base_url})
    out = io.StringIO()
    await run_doctor(config, online=True, out=out)
    found = {line.split(":")[0]: line for line in lines_of(out) if " model " in line}
    assert found["warn model tiny"].endswith("capabilities.tools = false")
    assert "refused a request with tools" in found["warn model tiny"]
    assert found["ok   model claude-sonnet-5-5"].endswith("takes tools")
    asked = [r.json for r in anthropic_.requests]
    assert {r["model"] for r in asked} == {"claude-sonnet-5-5", "claude-opus-5-5"}
    assert all(r["max_tokens"] == 5 and r["tools"][0]["name"] == "ping" for r in asked)


async def test_doctor_online_names_a_model_that_does_not_answer(tmp_path, endpoints):
    local, anthropic_ = endpoints
    local.unknown_models.add("gone")
    config = make_config(tmp_path, {
        "models": {"gone": {**LOCAL, "base_url": local.api_url, "model": "gone"}},
        "agent": {"small_model": "gone", "llm_max_retries": 0}},
        env={**FAKE_ENV, "ANTHROPIC_BASE_URL": anthropic_.base_url})
    out = io.StringIO()
    assert await run_doctor(config, online=True, out=out) == 1
    (line,) = [line for line in lines_of(out) if "model gone" in line]
    assert line.startswith("FAIL") and "does not exist" in line
