"""Configuration: one TOML file, validated by a JSON Schema, merged over built-in defaults.

The schema itself, and the wording of a file's first departure from it, are in
bot/config/schema.py; this module holds the defaults, the merge, the checks the schema cannot
express (paths, time zone, shards, prices) and the `Config` object the rest of the bot reads.

Where the file comes from: `--config PATH`, else `$MYCLAW_CONFIG`, else `./myclaw.toml`, else
the defaults alone. Secrets never live in the file; they come from the environment
(`ANTHROPIC_API_KEY`, `TELEGRAM_BOT_TOKEN`, `DISCORD_BOT_TOKEN`, `BRAVE_API_KEY`, ...).
Any problem becomes a `ConfigError` whose text is one line naming the file, the key and what was
expected.
"""

from __future__ import annotations

import copy
import functools
import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bot.config import prices
from bot.config.file import read_toml
from bot.config.schema import first_problem
from bot.core.errors import ConfigError
from bot.core.identity import OPERATOR
from bot.core.secrets.files import DEFAULT_SECRET_FILES, SECRET_ENV_VARS
from bot.core.secrets.redaction import environment_secrets

DEFAULTS: dict[str, Any] = {
    "agent": {
        "model": "claude-sonnet-5-5",
        "supra_model": "claude-opus-5-5",
        "small_model": "claude-haiku-5-5",
        "fallbacks": [],
        "workspace": "~/myclaw-workspace",
        "max_steps": 20,
        "max_tokens": 4096,
        "system_prompt": "",
        "profile": "default",
        "context_budget_tokens": 150_000,
        "max_concurrent_llm_calls": 256,
        "llm_timeout_seconds": 120.0,
        "llm_max_retries": 3,
        "stream": True,
        "session_scope": "sender",
        "workspace_mode": "shared",
        "shutdown_grace_seconds": 10,
        "timezone": "UTC",
        "language": "en",
        "allow_broad_workspace": False,
    },
    "jobs": {"enabled": True, "model": "", "max_per_sender": 20, "min_interval_seconds": 300,
             "grace_seconds": 3600, "run_lease_seconds": 3600, "tick_seconds": 30},
    "store": {"path": "", "url": ""},
    # keep_done_hours: how long handled updates are remembered; above Telegram's 24 h of
    # re-delivery, so an update delivered again after a restart is still recognised.
    "inbox": {"lease_seconds": 30, "keep_done_hours": 48, "replica": ""},
    "senders": {str(OPERATOR): "full", "unknown": "pairing"},
    "pairing": {"code_ttl_seconds": 3600, "max_codes_per_hour": 3},
    "approvals": {"timeout_seconds": 300, "approvers": [], "grant_ttl_seconds": 86_400,
                  "notify_approvers": True},
    "profiles": {"default": {"allowed_tools": [], "excluded_tools": [], "auto_approve": [],
                             "always_ask": [], "always_max_risk": "medium"}},
    "telegram": {"enabled": True, "base_url": "https://api.telegram.org/bot",
                 "base_file_url": "https://api.telegram.org/file/bot", "mode": "polling",
                 "groups": [], "webhook_url": "", "listen": "127.0.0.1", "port": 8443,
                 "webhook_path": "/telegram"},
    # The WhatsApp Cloud API. templates: approved message templates (each with one body
    # parameter carrying the text) used outside WhatsApp's 24-hour window, by kind.
    "whatsapp": {"enabled": True, "base_url": "https://graph.facebook.com", "api_version": "v23.0",
                 "phone_number_id": "", "business_account_id": "", "templates": {},
                 "template_language": "en",
                 "listen": "127.0.0.1", "port": 8443, "webhook_path": "/whatsapp"},
    "discord": {"enabled": True, "guilds": [], "roles": {}, "approvals_in_dm": False,
                "guild_ready_timeout": 2.0, "shard_count": 0, "shard_ids": []},
    # Socket Mode needs no public URL; "events" serves the Events API on listen:port.
    # groups: Slack user group id -> autonomy; slash_command: "" = none, else e.g. "/myclaw";
    # locale_hint: each person's Slack language (users.info, scope users:read), asked once.
    "slack": {"enabled": True, "base_url": "https://slack.com/api/", "mode": "socket",
              "team_id": "", "channels": [], "groups": {}, "webhook_path": "/slack/events",
              "listen": "127.0.0.1", "port": 3000, "slash_command": "/myclaw",
              "streaming": True, "locale_hint": True},
    "tools": {
        "custom_paths": [],
        "shell_run": {"timeout_seconds": 60, "max_output_bytes": 50_000, "cpu_seconds": 60,
                      "memory_mb": 2048, "max_file_mb": 1024, "max_processes": 256},
        "net": {"allow_hosts": [], "allow_domains": [], "timeout_seconds": 20,
                "max_bytes": 2_000_000},
        "web_search": {"provider": "brave", "searxng_url": "",
                       "brave_url": "https://api.search.brave.com/res/v1/web/search"},
        "supra_llm": {"daily_quota": 20},
    },
    # Models by alias: [models.local] provider = "openai", base_url = …, model = …
    "models": {},
    "mcp": {"servers": {}},
    "media": {
        "max_image_bytes": 25_000_000,      # what arrives; larger photos are scaled down
        "max_image_pixels": 60_000_000,     # decompression-bomb guard (checked before decoding)
        "max_document_bytes": 10_000_000,
        "max_pdf_pages": 100,
        "max_text_chars": 100_000,
        "max_audio_bytes": 25_000_000,
        "text_types": [".txt", ".md", ".markdown", ".csv", ".tsv", ".json", ".jsonl", ".yaml",
                       ".yml", ".toml", ".ini", ".xml", ".html", ".log", ".py", ".js", ".ts",
                       ".java", ".c", ".h", ".cpp", ".go", ".rs", ".rb", ".sh", ".sql", ".css"],
        "keep_images_turns": 3,              # later turns see a one-line placeholder instead
        "inbox_quota_bytes": 500_000_000,    # per sender, in <workspace>/inbox/
        "transcription": {"base_url": "", "model": "whisper-1", "timeout_seconds": 60,
                          "price_per_minute": 0.006},
        # Voice replies: espeak-ng (local) unless base_url names an OpenAI-compatible service.
        "speech": {"engine": "", "base_url": "", "model": "tts-1", "voice": "alloy", "voices": {},
                   "max_chars": 1000, "timeout_seconds": 30},
    },
    "health": {"enabled": False, "listen": "127.0.0.1", "port": 8080},
    # The operator's web console: off unless asked for; local only unless a proxy is put in front.
    # public_url: the address the login link names (e.g. https://bot.example.org behind a proxy);
    # "" means http://listen:port. secure_cookies "auto": Secure when the request came over TLS.
    "console": {"enabled": False, "listen": "127.0.0.1", "port": 8765, "public_url": "",
                "session_ttl_seconds": 8 * 3600, "login_ttl_seconds": 300, "secure_cookies": "auto"},
    "log": {"format": "text", "level": "INFO"},
    # Anthropic's list prices (USD per million tokens) when written; edit them to your rates.
    "prices": {
        "claude-sonnet-5-5": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.30},
        "claude-opus-5-5": {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.50},
        "claude-haiku-5-5": {"input": 1.0, "output": 5.0, "cache_write": 1.25, "cache_read": 0.10},
        # OpenAI's speech models, per million characters spoken (espeak-ng is free)
        "tts-1": {"characters": 15.0},
        "tts-1-hd": {"characters": 30.0},
    },
    # 0 = no limit. Terminal senders (cli:*) are the operator: only global_daily applies to them.
    "budgets": {"currency": "USD", "sender_daily": 2.0, "sender_monthly": 30.0,
                "global_daily": 20.0, "levels": {"read_only": 0.25}},
    # levels: messages a minute for a level in place of messages_per_minute (0 = not limited).
    "rate_limits": {"messages_per_minute": 20, "levels": {"full": 0},
                    "max_share_of_model_slots": 0.25},
    # secret_files: globs of file or folder names whose content no tool call reads unless a
    # person approved that call naming the file (bot/core/secrets/files.py).
    "security": {"secret_files": list(DEFAULT_SECRET_FILES)},
}


class SessionScope(StrEnum):
    """Whose conversation a message joins (`[agent] session_scope`): each sender their own in
    every chat, or one per chat shared by everyone in it."""

    SENDER = "sender"
    CHAT = "chat"


@functools.lru_cache(maxsize=256)
def _absolute(path: str, cwd: str) -> Path:
    """`path` (relative to `cwd`) with its symlinks resolved, once per process: the workspace
    is asked for on every tool call, and resolving walks the file system (about 0.15 ms a call
    on the 2-core test machine). A link made later is followed from the next start."""
    given = Path(path).expanduser()
    return (given if given.is_absolute() else Path(cwd, given)).resolve()


@dataclass
class Config:
    """The effective configuration: defaults merged with the file, plus the environment."""

    data: dict[str, Any]
    source: Path | None = None
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    _secrets: tuple[dict[str, str], tuple[str, ...]] | None = field(
        default=None, init=False, repr=False, compare=False)

    def __getitem__(self, section: str) -> Any:
        return self.data[section]

    @property
    def home(self) -> Path:
        return Path(self.env.get("HOME") or Path.home())

    def expand(self, path: str) -> Path:
        """`~` expanded against this config's HOME, then made absolute."""
        if path == "~" or path.startswith("~/"):
            path = str(self.home) + path[1:]
        return _absolute(path, "" if path.startswith(("/", "~")) else os.getcwd())

    @property
    def session_scope(self) -> SessionScope:
        return SessionScope(self.data["agent"]["session_scope"])

    @property
    def workspace(self) -> Path:
        return self.expand(self.data["agent"]["workspace"])

    @property
    def store_path(self) -> Path:
        configured = self.data["store"]["path"]
        if configured:
            return self.expand(configured)
        xdg = self.env.get("XDG_DATA_HOME") or str(self.home / ".local" / "share")
        return self.expand(xdg) / "myclaw" / "myclaw.db"

    @property
    def data_dir(self) -> Path:
        return self.store_path.parent

    @property
    def database_url(self) -> str | None:
        """The PostgreSQL store's URL (environment first, then `[store] url`); None = SQLite."""
        return self.secret("MYCLAW_DATABASE_URL") or self.data["store"]["url"] or None

    def secret(self, name: str) -> str | None:
        value = self.env.get(name, "").strip()
        return value or None

    def secret_values(self) -> list[str]:
        """Every secret the bot holds, for scrubbing child environments and logs (a database
        URL's password on its own too: a driver's message may quote it without the URL), and
        every other secret its environment holds: a variable whose name says so (GITHUB_TOKEN,
        SENTRY_DSN, MYSQL_PWD) and the password of any URL in one (bot/core/secrets/redaction.py,
        "the environment").
        Read from the environment once (the dispatcher asks at start-up), then the same list."""
        if self._secrets is not None and self._secrets[0] is self.env:
            return list(self._secrets[1])
        names = [*SECRET_ENV_VARS, *(t["api_key_env"] for t in self.data["models"].values()
                                     if t.get("api_key_env"))]
        values = [self.secret(n) for n in names]
        values.append(_url_password(self.secret("MYCLAW_DATABASE_URL")))
        found = [v for v in values if v and len(v) >= 4]
        found += [v for v in environment_secrets(self.env) if v not in found]
        self._secrets = (self.env, tuple(found))
        return list(found)

    @property
    def anthropic_base_url(self) -> str | None:
        return self.secret("ANTHROPIC_BASE_URL")

    @property
    def telegram_enabled(self) -> bool:
        return bool(self.data["telegram"]["enabled"] and self.secret("TELEGRAM_BOT_TOKEN"))

    @property
    def whatsapp_enabled(self) -> bool:
        return bool(self.data["whatsapp"]["enabled"] and self.secret("WHATSAPP_ACCESS_TOKEN"))

    @property
    def discord_enabled(self) -> bool:
        return bool(self.data["discord"]["enabled"] and self.secret("DISCORD_BOT_TOKEN"))

    @property
    def slack_enabled(self) -> bool:
        """The bot token, and the token its mode needs (Socket Mode's app-level token, the
        Events API's signing secret)."""
        slack = self.data["slack"]
        second = "SLACK_APP_TOKEN" if slack["mode"] == "socket" else "SLACK_SIGNING_SECRET"
        return bool(slack["enabled"] and self.secret("SLACK_BOT_TOKEN") and self.secret(second))

    def profile(self) -> dict[str, list[str]]:
        name = self.data["agent"]["profile"]
        profiles = self.data["profiles"]
        if name not in profiles:
            raise ConfigError(f"{self.origin}: [agent] profile = {name!r}: no [profiles.{name}]")
        return profiles[name]

    @property
    def main_model(self) -> str:
        """The model turns run on: the active profile's `model`, else `[agent] model`."""
        return self.profile().get("model") or self.data["agent"]["model"]

    @property
    def origin(self) -> str:
        return str(self.source) if self.source else "(built-in defaults)"


def _url_password(url: str | None) -> str | None:
    try:
        return urlsplit(url).password if url else None
    except ValueError:
        return None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key not in ("senders",):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    if "senders" in over:  # the file's [senders] table refines the defaults, never drops "unknown"
        out["senders"] = {**base.get("senders", {}), **over["senders"]}
    return out



def resolve_path(cli_path: str | None, env: dict[str, str]) -> Path | None:
    if cli_path:
        return Path(cli_path).expanduser()
    if env.get("MYCLAW_CONFIG"):
        return Path(env["MYCLAW_CONFIG"]).expanduser()
    local = Path("myclaw.toml")
    return local if local.exists() else None


def load(cli_path: str | None = None, env: dict[str, str] | None = None) -> Config:
    env = dict(os.environ) if env is None else env
    path = resolve_path(cli_path, env)
    raw = read_toml(path) if path is not None else {}
    return from_dict(raw, source=path, env=env)


def from_dict(raw: dict[str, Any], source: Path | None = None,
              env: dict[str, str] | None = None) -> Config:
    origin = str(source) if source else "(config)"
    problem = first_problem(raw)
    if problem is not None:
        raise ConfigError(f"{origin}: {problem}")
    if _url_password(raw.get("store", {}).get("url")):
        raise ConfigError(f"{origin}: [store] url carries a password; secrets never live in the "
                          f"file: set MYCLAW_DATABASE_URL in the environment instead")
    config = Config(_merge(DEFAULTS, raw), source, dict(os.environ) if env is None else env)
    config.profile()  # the chosen profile must exist
    for section, key, resolve in (("agent", "workspace", lambda: config.workspace),
                                  ("store", "path", lambda: config.store_path)):
        try:
            resolve()
        except (RuntimeError, ValueError, OSError) as exc:  # ~nobody/, a NUL byte, a loop
            raise ConfigError(f"{origin}: [{section}] {key} = {config[section][key]!r}: "
                              f"not a usable path ({exc})") from exc
    _check_timezone(config, origin)
    _check_shards(config, origin)
    prices.parse(config["prices"], config.origin)  # every priced model has all four rates
    return config


def _check_shards(config: Config, origin: str) -> None:
    count, ids = config["discord"]["shard_count"], config["discord"]["shard_ids"]
    if ids and not count:
        raise ConfigError(f"{origin}: [discord] shard_ids needs shard_count (how many shards the "
                          "bot has in all, across every replica)")
    wrong = [i for i in ids if i >= count] if count else []
    if wrong:
        raise ConfigError(f"{origin}: [discord] shard_ids {wrong} are not below shard_count = "
                          f"{count} (shards are numbered from 0)")


def model_names(config: Config) -> list[tuple[str, str]]:
    """Every place the config names a model: (where, name)."""
    agent = config["agent"]
    named = [(f"[agent] {key}", agent[key]) for key in ("model", "supra_model", "small_model")]
    named += [("[agent] fallbacks", name) for name in agent["fallbacks"]]
    named += [(f"[profiles.{p}] model", t["model"]) for p, t in config["profiles"].items()
              if t.get("model")]
    if config["jobs"]["model"]:
        named.append(("[jobs] model", config["jobs"]["model"]))
    return named


def _check_timezone(config: Config, origin: str) -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    name = config["agent"]["timezone"]
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"{origin}: [agent] timezone = {name!r}: unknown time zone; use an IANA "
                          "name like 'Europe/Rome' or 'UTC'") from exc
