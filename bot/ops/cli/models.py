"""`myclaw models`: every model the config can use — aliases and the bare ids it names — with
provider, endpoint, key, capabilities and prices; and the model checks of `myclaw doctor`
(`--online` asks each model a one-token question, and whether it takes tools).

Key values are never printed, only whether each variable is set.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import IO, Any

from bot.config.settings import Config, model_names
from bot.core.errors import LLMError

PING = {"name": "ping", "description": "Answers pong.",
        "input_schema": {"type": "object", "properties": {}, "additionalProperties": False}}
QUESTION = "Reply with the single word: ok"
NO_TOOLS_FIX = "set [models.{alias}] capabilities.tools = false"


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    models = subparsers.add_parser("models", help="the models the config can use: aliases, "
                                   "providers, capabilities and prices")
    models.set_defaults(handler=_models_command)


async def _models_command(args: argparse.Namespace, config: Config,
                          out: IO[str] | None = None) -> int:
    out = sys.stdout if out is None else out
    for line in model_lines(config):
        print(line, file=out)
    return 0


def _specs(config: Config) -> list[Any]:
    """Every alias, then every bare id the config names, once each, in that order."""
    from bot.llm.models import Models

    models = Models(config)
    specs = list(models.specs.values())
    for _, name in model_names(config):
        for spec in models.chain(name):
            if all(spec is not known for known in specs):
                specs.append(spec)
    return specs


def _uses(config: Config) -> dict[str, list[str]]:
    uses: dict[str, list[str]] = {}
    for where, name in model_names(config):
        uses.setdefault(name, []).append(where)
    return uses


def model_lines(config: Config) -> list[str]:
    from bot.config.prices import PriceTable
    from bot.llm.models import Models

    table = PriceTable.from_config(config, Models(config).price_tables())
    uses = _uses(config)
    lines = []
    for spec in _specs(config):
        caps = spec.capabilities
        endpoint = spec.base_url or ("ANTHROPIC_BASE_URL or api.anthropic.com"
                                     if spec.provider == "anthropic" else "api.openai.com")
        key = "set" if config.secret(spec.api_key_env) else "not set"
        price = table.price(spec.model)
        can = [name for name, on in (("tools", caps.tools),
                                     ("parallel calls", caps.parallel_tool_calls),
                                     ("vision", caps.vision), ("PDFs", caps.pdfs)) if on]
        lines += [
            f"{spec.alias}: {spec.provider} {spec.model}"
            + (f"  (used as {', '.join(uses[spec.alias])})" if spec.alias in uses else ""),
            f"    endpoint {endpoint}; key {spec.api_key_env} {key}",
            f"    can: {', '.join(can) or 'text only'}; prompt caching {caps.prompt_caching}; "
            f"context {caps.context_tokens:,} tokens, output up to {caps.max_output_tokens:,}",
            f"    price per million tokens ({config['budgets']['currency']}): input "
            f"{price.input:g}, output {price.output:g}, cache write {price.cache_write:g}, "
            f"cache read {price.cache_read:g}"]
    return lines


def key_checks(config: Config) -> list[tuple[str, str, str]]:
    """(status, name, detail) for each key variable the used models need: FAIL when a model a
    turn runs on lacks it, warn when only supra_llm's does."""
    from bot.llm.capabilities import is_local
    from bot.llm.models import ANTHROPIC_KEY, Models

    models = Models(config)
    needed: dict[str, list[str]] = {}
    for spec in _specs(config):
        if not (spec.provider == "openai" and is_local(spec.base_url)):
            needed.setdefault(spec.api_key_env, []).append(spec.alias)
    blocking = {env for env, _, where in models.missing_keys(model_names(config), config)
                if where != "[agent] supra_model"}
    checks = []
    for env, aliases in needed.items():
        by = "" if env == ANTHROPIC_KEY else f" (for {', '.join(aliases)})"
        if config.secret(env):
            checks.append(("ok", env, f"set: the agent can chat{by}"))
        elif env in blocking:
            checks.append(("FAIL", env, f"not set: needed to chat on any channel{by}"))
        else:
            checks.append(("warn", env, f"not set: supra_llm cannot use its model{by}"))
    return checks


async def online_checks(config: Config) -> list[tuple[str, str, str]]:
    """Ask each model one short question with a tool on offer: does it answer, take tools?"""
    from bot.llm.client import LLMClient

    llm = LLMClient(config)
    try:
        return [await _ask(llm, spec) for spec in _specs(config)]
    finally:
        await llm.close()


async def _ask(llm: Any, spec: Any) -> tuple[str, str, str]:
    name = f"model {spec.alias}"
    params: dict[str, Any] = {"model": spec.model, "max_tokens": 5,
                              "messages": [{"role": "user", "content": QUESTION}]}
    started = time.monotonic()
    try:
        await llm.provider(spec).complete({**params, "tools": [PING]}, None)
    except LLMError as with_tools:
        try:
            await llm.provider(spec).complete(params, None)
        except LLMError as exc:
            return ("FAIL", name, exc.user_message)
        if not spec.capabilities.tools:
            return ("ok", name, "answers; takes no tools (as configured)")
        return ("warn", name, f"answers, but refused a request with tools ({with_tools}): "
                + NO_TOOLS_FIX.format(alias=spec.alias))
    seconds = time.monotonic() - started
    tools = "takes tools" if spec.capabilities.tools else "takes tools (off in the config)"
    return ("ok", name, f"answered in {seconds:.1f} s; {tools}")
