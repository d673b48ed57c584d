"""The shape of the configuration file: a JSON Schema of every section and key, and one line
describing the first place a file departs from it.

bot/config/settings.py validates a file against this before merging it over its built-in defaults; the
sender-key pattern and hint are also used by `myclaw pair` (bot/ops/cli/core.py) to check a sender
named on the command line.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from bot.config.json_schema import Problem, SubsetValidator
from bot.core.identity import CHANNELS, LEVELS, UNKNOWN_POLICIES, channel_prefix

_STR_LIST = {"type": "array", "items": {"type": "string"}}
_ID_LIST = {"type": "array", "items": {"type": ["integer", "string"]}}
_LEVEL = {"enum": list(LEVELS)}
_RISK = {"enum": ["low", "medium", "high"]}
# Sender ids as the channels produce them: numeric Telegram/Discord user ids (never a @username
# or a display name, which anyone can change), a word for the terminal. A key of another shape
# can never match anybody, so it is refused rather than silently ignored.
SENDER_KEY = (r"^(cli:[A-Za-z0-9_.\-]+|telegram:[0-9]{1,20}|discord:[0-9]{1,20}"
              r"|slack:[UW][A-Z0-9]{2,20}|whatsapp:[0-9]{5,20})$")
SENDER_HINT = ("Telegram and Discord senders are numeric user ids, e.g. \"telegram:123456789\", "
               "Slack senders member ids, e.g. \"slack:U0123ABCD\", WhatsApp senders phone numbers "
               "in international form without +, e.g. \"whatsapp:393471234567\"; "
               "send /whoami to the bot to see yours (or write to it and run `myclaw pair list`)")
_MONEY = {"type": "number", "minimum": 0}


def _obj(props: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "additionalProperties": False, **extra}


_PROFILE = _obj({
    "model": {"type": "string", "minLength": 1},   # an alias or a bare Anthropic id
    "allowed_tools": _STR_LIST,
    "excluded_tools": _STR_LIST,
    "auto_approve": _STR_LIST,
    "always_ask": _STR_LIST,
    "always_max_risk": _RISK,
})

_MCP_SERVER = _obj({
    "command": {"type": "string"},
    "args": _STR_LIST,
    "env": {"type": "object", "additionalProperties": {"type": "string"}},
    "url": {"type": "string"},
    "headers": {"type": "object", "additionalProperties": {"type": "string"}},
    "risk": _RISK,
    "has_side_effects": {"type": "boolean"},
    "local": {"type": "boolean"},
    "timeout_seconds": {"type": "number", "exclusiveMinimum": 0},
    "startup_timeout_seconds": {"type": "number", "exclusiveMinimum": 0},
    "enabled": {"type": "boolean"},
    "tools": {"type": "object", "additionalProperties": _obj({
        "risk": _RISK,
        "has_side_effects": {"type": "boolean"},
        "returns_untrusted": {"type": "boolean"},
        "local": {"type": "boolean"},
    })},
})

# A model by alias (bot/llm/models.py): which API, which id, where the key is; what it can do
# (bot/llm/capabilities.py: defaults per provider, overridden here) and what it costs.
_MODEL = _obj({
    "provider": {"enum": ["anthropic", "openai"]},
    "model": {"type": "string", "minLength": 1},
    "base_url": {"type": "string", "pattern": r"^(https?://.+)?$"},
    "api_key_env": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
    "capabilities": _obj({
        "tools": {"type": "boolean"},
        "parallel_tool_calls": {"type": "boolean"},
        "vision": {"type": "boolean"},
        "pdfs": {"type": "boolean"},
        "prompt_caching": {"enum": ["explicit", "automatic", "none"]},
        "context_tokens": {"type": "integer", "minimum": 1000},
        "max_output_tokens": {"type": "integer", "minimum": 1},
    }),
    # per million tokens; cache rates default to the input rate
    "prices": _obj({key: _MONEY for key in ("input", "output", "cache_write", "cache_read")},
                   required=["input", "output"]),
}, required=["provider", "model"])

SCHEMA: dict[str, Any] = _obj({
    "agent": _obj({
        "model": {"type": "string", "minLength": 1},
        "supra_model": {"type": "string", "minLength": 1},
        "small_model": {"type": "string", "minLength": 1},
        # tried in order when the model asked is overloaded, rate limited, failing or slow
        "fallbacks": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "workspace": {"type": "string", "minLength": 1},
        "max_steps": {"type": "integer", "minimum": 1, "maximum": 200},
        "max_tokens": {"type": "integer", "minimum": 1},
        "system_prompt": {"type": "string"},
        "profile": {"type": "string"},
        "context_budget_tokens": {"type": "integer", "minimum": 1000},
        "max_concurrent_llm_calls": {"type": "integer", "minimum": 1},
        "llm_timeout_seconds": {"type": "number", "exclusiveMinimum": 0},
        "llm_max_retries": {"type": "integer", "minimum": 0, "maximum": 10},
        "stream": {"type": "boolean"},
        "session_scope": {"enum": ["sender", "chat"]},
        "workspace_mode": {"enum": ["shared", "per_sender"]},
        "shutdown_grace_seconds": {"type": "number", "minimum": 0},
        "timezone": {"type": "string", "minLength": 1},
        # what people hear when neither /language nor their platform says (bot/access/languages.py)
        "language": {"enum": ["en", "it", "es"]},
        "allow_broad_workspace": {"type": "boolean"},
    }),
    "jobs": _obj({
        "enabled": {"type": "boolean"},
        "model": {"type": "string"},   # "" = the agent's rule; else an alias or a bare id
        "max_per_sender": {"type": "integer", "minimum": 0},
        "min_interval_seconds": {"type": "number", "minimum": 60},
        "grace_seconds": {"type": "number", "minimum": 0},
        "run_lease_seconds": {"type": "number", "minimum": 60},
        "tick_seconds": {"type": "number", "exclusiveMinimum": 0},
    }),
    # path: "" = the default under the XDG data dir. url: "postgresql://..." selects PostgreSQL
    # (MYCLAW_DATABASE_URL overrides it; a password belongs there, never in the file).
    "store": _obj({"path": {"type": "string"},
                   "url": {"type": "string", "pattern": r"^(postgres(ql)?://.*)?$"}}),
    # replica: who claims inbox rows ("" = "local" on SQLite, host:pid on PostgreSQL; processes
    # sharing one database need distinct names). MYCLAW_REPLICA overrides it.
    "inbox": _obj({"lease_seconds": {"type": "number", "minimum": 3},
                   "keep_done_hours": {"type": "number", "minimum": 25},
                   "replica": {"type": "string", "pattern": r"^[A-Za-z0-9_.:-]{0,100}$"}}),
    "senders": {
        "type": "object",
        "properties": {"unknown": {"enum": list(UNKNOWN_POLICIES)}},
        "patternProperties": {SENDER_KEY: _LEVEL},
        "additionalProperties": False,
    },
    "pairing": _obj({
        "code_ttl_seconds": {"type": "integer", "minimum": 30},
        "max_codes_per_hour": {"type": "integer", "minimum": 1},
    }),
    "approvals": _obj({
        "timeout_seconds": {"type": "integer", "minimum": 10},
        "approvers": _STR_LIST,
        "grant_ttl_seconds": {"type": "integer", "minimum": 60},
        "notify_approvers": {"type": "boolean"},
    }),
    "profiles": {"type": "object", "additionalProperties": _PROFILE},
    "telegram": _obj({
        "enabled": {"type": "boolean"},
        "base_url": {"type": "string"},
        "base_file_url": {"type": "string"},
        "mode": {"enum": ["polling", "webhook"]},
        "groups": _ID_LIST,
        "webhook_url": {"type": "string"},
        "listen": {"type": "string"},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "webhook_path": {"type": "string"},
    }),
    "whatsapp": _obj({
        "enabled": {"type": "boolean"},
        "base_url": {"type": "string"},
        "api_version": {"type": "string", "pattern": r"^v[0-9]+\.[0-9]+$"},
        "phone_number_id": {"type": ["string", "integer"]},
        "business_account_id": {"type": ["string", "integer"]},
        "templates": _obj({"reminder": {"type": "string"}, "job": {"type": "string"},
                           "approval": {"type": "string"}}),
        "template_language": {"type": "string"},
        "listen": {"type": "string"},
        "port": {"type": "integer", "minimum": 0, "maximum": 65535},
        "webhook_path": {"type": "string"},
    }),
    "discord": _obj({
        "enabled": {"type": "boolean"},
        "guilds": _ID_LIST,
        "roles": {"type": "object", "additionalProperties": _LEVEL},
        "approvals_in_dm": {"type": "boolean"},
        "guild_ready_timeout": {"type": "number", "minimum": 0},
        "shard_count": {"type": "integer", "minimum": 0, "maximum": 65535},
        "shard_ids": {"type": "array", "items": {"type": "integer", "minimum": 0},
                      "uniqueItems": True},
    }),
    "slack": _obj({
        "enabled": {"type": "boolean"},
        "base_url": {"type": "string", "pattern": "^https?://"},
        "mode": {"enum": ["socket", "events"]},
        "team_id": {"type": "string", "pattern": "^(T[A-Z0-9]{2,20})?$"},
        "channels": {"type": "array", "items": {"type": "string", "pattern": "^[CG][A-Z0-9]{2,20}$"}},
        "groups": {"type": "object", "additionalProperties": _LEVEL,
                   "propertyNames": {"pattern": "^S[A-Z0-9]{2,20}$"}},
        "webhook_path": {"type": "string", "pattern": "^/"},
        "listen": {"type": "string"},
        "port": {"type": "integer", "minimum": 0, "maximum": 65535},
        "slash_command": {"type": "string", "pattern": "^(/[a-z0-9_-]{1,31})?$"},
        "streaming": {"type": "boolean"},
        "locale_hint": {"type": "boolean"},
    }),
    "tools": {
        "type": "object",
        "properties": {
            "custom_paths": _STR_LIST,
            "shell_run": _obj({
                "timeout_seconds": {"type": "number", "exclusiveMinimum": 0},
                "max_output_bytes": {"type": "integer", "minimum": 1},
                # Sandbox limits per process (0 = none): CPU seconds, address space, file size,
                # processes of the bot's user.
                "cpu_seconds": {"type": "integer", "minimum": 0},
                "memory_mb": {"type": "integer", "minimum": 0},
                "max_file_mb": {"type": "integer", "minimum": 0},
                "max_processes": {"type": "integer", "minimum": 0},
            }),
            "net": _obj({
                "allow_hosts": _STR_LIST,
                "allow_domains": _STR_LIST,
                "timeout_seconds": {"type": "number", "exclusiveMinimum": 0},
                "max_bytes": {"type": "integer", "minimum": 1},
            }),
            "web_search": _obj({
                "provider": {"enum": ["brave", "searxng"]},
                "searxng_url": {"type": "string"},
                "brave_url": {"type": "string"},
            }),
            "supra_llm": _obj({"daily_quota": {"type": "integer", "minimum": 0}}),
        },
        # Custom tools may take a table of their own settings.
        "additionalProperties": {"type": "object"},
    },
    "models": {"type": "object", "propertyNames": {"pattern": r"^[A-Za-z0-9_.:/-]{1,64}$"},
               "additionalProperties": _MODEL},
    "mcp": _obj({"servers": {"type": "object", "additionalProperties": _MCP_SERVER}}),
    "media": _obj({
        "max_image_bytes": {"type": "integer", "minimum": 1},
        "max_image_pixels": {"type": "integer", "minimum": 1},
        "max_document_bytes": {"type": "integer", "minimum": 1},
        "max_pdf_pages": {"type": "integer", "minimum": 1},
        "max_text_chars": {"type": "integer", "minimum": 1},
        "max_audio_bytes": {"type": "integer", "minimum": 1},
        "text_types": _STR_LIST,
        "keep_images_turns": {"type": "integer", "minimum": 1},
        "inbox_quota_bytes": {"type": "integer", "minimum": 0},
        "transcription": _obj({
            "base_url": {"type": "string"},
            "model": {"type": "string"},
            "timeout_seconds": {"type": "number", "exclusiveMinimum": 0},
            "price_per_minute": {"type": "number", "minimum": 0},
        }),
        "speech": _obj({
            "engine": {"enum": ["", "http", "espeak-ng"]},
            "base_url": {"type": "string"},
            "model": {"type": "string"},
            "voice": {"type": "string"},
            "voices": {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}},
            "max_chars": {"type": "integer", "minimum": 1, "maximum": 4096},
            "timeout_seconds": {"type": "number", "exclusiveMinimum": 0},
        }),
    }),
    "health": _obj({
        "enabled": {"type": "boolean"},
        "listen": {"type": "string"},
        "port": {"type": "integer", "minimum": 0, "maximum": 65535},
    }),
    "console": _obj({
        "enabled": {"type": "boolean"},
        "listen": {"type": "string", "minLength": 1},
        "port": {"type": "integer", "minimum": 0, "maximum": 65535},
        "public_url": {"type": "string"},
        "session_ttl_seconds": {"type": "integer", "minimum": 60},
        "login_ttl_seconds": {"type": "integer", "minimum": 10, "maximum": 3600},
        "secure_cookies": {"enum": ["auto", True, False]},
    }),
    "security": _obj({"secret_files": {"type": "array", "items": {"type": "string", "minLength": 1}}}),
    "log": _obj({
        "format": {"enum": ["text", "json"]},
        "level": {"enum": ["DEBUG", "INFO", "WARNING", "ERROR"]},
    }),
    "prices": {"type": "object", "additionalProperties": _obj(
        {key: _MONEY for key in ("input", "output", "cache_write", "cache_read", "characters")})},
    "budgets": _obj({
        "currency": {"type": "string", "minLength": 1, "maxLength": 8},
        "sender_daily": _MONEY,
        "sender_monthly": _MONEY,
        "global_daily": _MONEY,
        "levels": _obj({level: _MONEY for level in LEVELS}),
    }),
    "rate_limits": _obj({
        "messages_per_minute": {"type": "integer", "minimum": 0},
        "levels": _obj({level: {"type": "integer", "minimum": 0} for level in LEVELS}),
        "max_share_of_model_slots": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    }),
})


@functools.cache
def _validator() -> SubsetValidator:
    return SubsetValidator(SCHEMA)   # the schema keeps to bot.config.json_schema's keywords


def first_problem(raw: dict[str, Any]) -> str | None:
    """The first departure from the schema (in key order) as one line, or None when the file fits."""
    error = next(iter(sorted(_validator().iter_errors(raw), key=lambda e: list(e.path))), None)
    return _describe(error) if error is not None else None


def _describe(error: Problem) -> str:
    path = [str(p) for p in error.absolute_path]
    if error.validator == "additionalProperties":
        pattern = error.schema.get("patternProperties")
        extra = sorted(key for key in set(error.instance) - set(error.schema.get("properties", {}))
                       if not any(re.search(p, key) for p in pattern or ()))
        where = ".".join(path)
        for key in extra:
            if pattern and where == "senders" and channel_prefix(key) in CHANNELS:
                return f"[senders] {key!r}: can never match a sender: {SENDER_HINT}"
            if pattern and where == "senders":
                return (f"[senders] {key!r}: unknown key; expected a sender like "
                        f"'telegram:123' or 'unknown'")
            return f"[{where}] {key!r}: unknown key" if where else f"{key!r}: unknown section"
    key = ".".join(path) or "(top level)"
    section, _, rest = key.partition(".")
    label = f"[{section}] {rest}" if rest else key
    if error.validator == "enum":
        allowed = ", ".join(repr(v) for v in error.validator_value)
        return f"{label} = {error.instance!r}: expected one of {allowed}"
    if error.validator == "type":
        return f"{label} = {error.instance!r}: expected {error.validator_value}"
    return f"{label}: {error.message}"
