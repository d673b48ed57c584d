"""`myclaw doctor [--security] [--telegram] [--slack] [--whatsapp] [--online]`: what is
ready, what is missing, what is risky (`--online` asks each configured model a one-token
question: bot/ops/cli/models.py).

One line per check: `ok`, `warn` (works, but something is off or off on purpose) or `FAIL`
(start-up is blocked, or `--security` found a high-severity setting). Exit status 1 when any line
is FAIL. An invalid config file never reaches here: loading it fails first, with the file, key and
expected value on one line (exit 2).

Secret values are never printed, only whether each is set and what it enables.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import logging
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from bot.config.settings import Config
from bot.core.errors import MyclawError
from bot.ops.preflight import Check, Status
from bot.ops.preflight import checks as preflight_checks
from bot.store.migrations import MIGRATIONS

log = logging.getLogger(__name__)

LATEST_SCHEMA = max(number for number, _, _ in MIGRATIONS)
CLOCK_SKEW_WARN_S = 1.0
CLOCK_SKEW_FAIL_S = 30.0


class _RollBack(Exception):
    """Raised inside the write probe so its transaction is rolled back."""


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    doctor = subparsers.add_parser(
        "doctor", help="check configuration, store, secrets and tools",
        description="Check what myclaw needs to start. Exit status 1 when something blocks it.")
    doctor.add_argument("--security", action="store_true",
                        help="also audit the configuration for risky settings")
    doctor.add_argument("--telegram", action="store_true",
                        help="also check TELEGRAM_BOT_TOKEN with the Bot API (getMe)")
    doctor.add_argument("--slack", action="store_true",
                        help="also check the Slack app: auth.test, scopes, Socket Mode")
    doctor.add_argument("--whatsapp", action="store_true",
                        help="also check the WhatsApp token, phone number id, webhook "
                             "subscription and templates with the Graph API")
    doctor.add_argument("--online", action="store_true",
                        help="also ask each configured model a one-token question (costs a "
                             "few tokens) and whether it takes tools")
    doctor.set_defaults(handler=_doctor_command)


async def _doctor_command(args: argparse.Namespace, config: Config) -> int:
    return await run_doctor(config, security=args.security, telegram=args.telegram,
                            slack=args.slack, whatsapp=args.whatsapp, online=args.online)


async def run_doctor(config: Config, *, security: bool = False, telegram: bool = False,
                     slack: bool = False, whatsapp: bool = False, online: bool = False,
                     out: IO[str] | None = None,
                     import_module: Callable[[str], Any] = importlib.import_module) -> int:
    """Print every check and return the exit status (1 if any check FAILed)."""
    out = sys.stdout if out is None else out
    # The checks `myclaw run` refuses to start on (bot/ops/preflight.py), then the store, keys
    # and tools.
    checks = [*config_checks(config), *preflight_checks(config, import_module),
              *(await store_checks(config)), *secret_checks(config), *tool_checks(config)]
    if telegram:
        checks.append(await telegram_check(config, import_module))
    if slack:
        checks.extend(await slack_checks(config, import_module))
    if whatsapp:
        checks.extend(await whatsapp_checks(config, import_module))
    if online:
        from bot.ops.cli.models import online_checks

        checks.extend(Check(*found) for found in await online_checks(config))
    if security:
        checks.extend(security_checks(config))
        checks.extend(environment_checks(config))
    for check in checks:
        print(check.line(), file=out)
    failed = sum(c.status == "FAIL" for c in checks)
    print(f"{len(checks)} checks, {failed} failed", file=out)
    return 1 if failed else 0


def config_checks(config: Config) -> list[Check]:
    if config.source is None:
        return [Check("warn", "config", "no config file (--config, $MYCLAW_CONFIG, "
                      "./myclaw.toml); using the built-in defaults")]
    return [Check("ok", "config", f"{config.source} is valid")]


async def store_checks(config: Config, clock: Callable[[], float] = time.time) -> list[Check]:
    # The drivers (aiosqlite, asyncpg) are needed only by the checks that open the store.
    from bot.store.factory import postgres_store, store_location
    from bot.store.sqlite import Store

    url = config.database_url
    where = store_location(config)
    existed = url is not None or config.store_path.exists()
    try:
        # PostgreSQL is shared by every replica: doctor looks and leaves migrating to
        # `myclaw migrate` (or the next `myclaw run`). A new SQLite file is created and migrated.
        store = postgres_store(url, migrate=False) if url else Store(config.store_path)
        await store.open()
    except MyclawError as exc:
        return [Check("FAIL", "store", str(exc))]
    try:
        version = await store.schema_version()
        writable = await _probe_write(store, where)
        skew = await _clock_skew(store, clock) if store.dialect == "postgresql" else None
    finally:
        await store.close()
    created = "" if existed else ", created now"
    checks = [Check("ok", "store", f"{where} opens (schema version {version}{created})")]
    if version > LATEST_SCHEMA:
        checks.append(Check("FAIL", "store schema", f"version {version} is newer than this "
                            f"myclaw knows ({LATEST_SCHEMA}): upgrade myclaw"))
    elif version < LATEST_SCHEMA:
        checks.append(Check("FAIL", "store schema", f"version {version}, this myclaw needs "
                            f"{LATEST_SCHEMA}: run `myclaw migrate`"))
    checks.append(Check("ok", "store writable", "a write transaction succeeds") if writable is None
                  else Check("FAIL", "store writable", writable))
    if skew is not None:
        checks.append(_skew_check(skew))
    if url:
        checks.append(_replica_name_check(config))
    return checks


async def _probe_write(store: Any, where: str) -> str | None:
    """Try a real schema write and roll it back; None if it worked, else why not."""
    try:
        async with store.transaction() as tx:
            await tx.execute("CREATE TABLE doctor_write_probe (x INTEGER)")
            raise _RollBack
    except _RollBack:
        return None
    # Either driver's errors (sqlite3, asyncpg): doctor names the failure instead of dying on it.
    except Exception as exc:
        return f"{where}: {type(exc).__name__}: {exc}"


async def _clock_skew(store: Any, clock: Callable[[], float]) -> float:
    """This machine's clock minus the database server's, the round trip split evenly."""
    before = clock()
    server = await store.server_time()
    after = clock()
    return (before + after) / 2 - server


def _skew_check(skew: float) -> Check:
    # Every replica stamps expiries and leases with its own clock; the database is the referee
    # they all see, so each must agree with it.
    detail = f"this machine is {abs(skew):.3f} s {'ahead of' if skew > 0 else 'behind'} the server"
    if abs(skew) > CLOCK_SKEW_FAIL_S:
        return Check("FAIL", "store clock", f"{detail}: approvals and codes would expire at the "
                     f"wrong time on some replicas; synchronise the clocks (NTP)")
    if abs(skew) > CLOCK_SKEW_WARN_S:
        return Check("warn", "store clock", f"{detail}: synchronise the clocks (NTP)")
    return Check("ok", "store clock", detail)


def _replica_name_check(config: Config) -> Check:
    # A process takes up the unfinished turns of earlier runs of its own name at start-up; the
    # default name on PostgreSQL (host:pid) is new at every start.
    named = config.env.get("MYCLAW_REPLICA") or config["inbox"]["replica"]
    if named:
        return Check("ok", "replica name", f"{named!r}: after a restart its unfinished turns "
                     "are taken up at once")
    return Check("warn", "replica name", "none set ([inbox] replica or MYCLAW_REPLICA): after a "
                 "restart, this replica's unfinished turns wait for their inbox lease "
                 f"({config['inbox']['lease_seconds']} s) and a call approved but not started "
                 "is not run; give each replica a stable name of its own")


def secret_checks(config: Config) -> list[Check]:
    from bot.ops.cli.models import key_checks

    checks = [Check(*found) for found in key_checks(config)]   # the channels' are preflight's
    telegram = config["telegram"]
    if config.telegram_enabled and telegram["mode"] == "webhook":
        checks.append(Check("ok", "TELEGRAM_WEBHOOK_SECRET", "set: webhook updates are verified")
                      if config.secret("TELEGRAM_WEBHOOK_SECRET")
                      else Check("FAIL", "TELEGRAM_WEBHOOK_SECRET",
                                 "not set: webhook mode needs it to reject forged updates"))
    # Without the key, the web_search line of tool_checks says what to set: one hint, not two.
    if config["tools"]["web_search"]["provider"] == "brave" and config.secret("BRAVE_API_KEY"):
        checks.append(Check("ok", "BRAVE_API_KEY", "set: web_search can use Brave"))
    return checks


def tool_checks(config: Config) -> list[Check]:
    from bot.app import build_tools

    try:
        registry, report = build_tools(config)
    # A tool module can fail in any way at import or build time; doctor's job is to name the
    # failure instead of dying on it (the traceback is kept at DEBUG).
    except Exception as exc:
        log.debug("building the tool registry failed", exc_info=True)
        return [Check("FAIL", "tools", f"the tool registry cannot be built: "
                      f"{type(exc).__name__}: {exc}")]
    names = registry.names()
    checks = [Check("ok" if names else "warn", "tools",
                    f"{len(names)} registered" + (f" ({', '.join(names)})" if names else ""))]
    for name, why in sorted(registry.unavailable.items()):
        checks.append(Check("warn", f"tool {name}", f"not registered: {why}"))
    for where, error in report.errors.items():
        checks.append(Check("warn", where, f"failed to load: {error}"))
    return checks


async def telegram_check(config: Config,
                         import_module: Callable[[str], Any] = importlib.import_module) -> Check:
    from bot.app import channel_module

    if not config.secret("TELEGRAM_BOT_TOKEN"):
        return Check("FAIL", "telegram getMe", "TELEGRAM_BOT_TOKEN is not set")
    try:
        check_token = channel_module("telegram", import_module).check_token
    except (ImportError, AttributeError) as exc:
        return Check("warn", "telegram getMe", f"cannot check: channels.telegram.check_token is "
                     f"not available ({exc})")
    try:
        result = check_token(config)
        if inspect.isawaitable(result):
            result = await result
    except MyclawError as exc:
        return Check("FAIL", "telegram getMe", str(exc))
    return Check("ok", "telegram getMe", f"token accepted{_describe_bot(result)}")


async def slack_checks(config: Config,
                       import_module: Callable[[str], Any] = importlib.import_module) -> list[Check]:
    from bot.app import channel_module

    try:
        check_slack = channel_module("slack", import_module).check_slack
    except (ImportError, AttributeError) as exc:
        return [Check("warn", "slack", f"cannot check: channels.slack is not available ({exc})")]
    return [Check(status, name, detail) for status, name, detail in await check_slack(config)]
async def whatsapp_checks(config: Config,
                          import_module: Callable[[str], Any] = importlib.import_module
                          ) -> list[Check]:
    from bot.app import channel_module

    try:
        diagnose = channel_module("whatsapp", import_module).doctor.diagnose
    except (ImportError, AttributeError) as exc:
        return [Check("warn", "whatsapp", f"cannot check: channels.whatsapp.doctor is not "
                      f"available ({exc})")]
    try:
        return [Check(status, name, detail) for status, name, detail in await diagnose(config)]
    except MyclawError as exc:
        return [Check("FAIL", "whatsapp", str(exc))]


def _describe_bot(result: Any) -> str:
    username = result.get("username") if isinstance(result, dict) else getattr(result, "username",
                                                                                None)
    if username:
        return f" (@{username})"
    return f" ({result})" if isinstance(result, str) and result else ""


def environment_checks(config: Config) -> list[Check]:
    """What tools say about this machine (e.g. whether shell_run's sandbox works here)."""
    from bot.app import build_registry

    try:
        registry = build_registry(config)
    except Exception:  # tool_checks already reported it, with the reason
        return []
    checks = []
    for name in registry.names():
        report = getattr(registry.get(name), "environment_report", None)
        if not callable(report):
            continue
        summary, findings = report()
        if summary:
            checks.append(Check("ok", f"{name} environment", summary))
        checks += [Check("FAIL" if f.severity == "high" else "warn",
                         f"security [{f.severity}] {f.key}", f"{f.problem}. Fix: {f.fix}")
                   for f in findings]
    return checks


def security_checks(config: Config) -> list[Check]:
    from bot.ops.security_audit import audit, groups_explained

    findings = audit(config)
    groups = Check("ok", "security groups", groups_explained(config))
    if not findings:
        return [Check("ok", "security", "no risky settings found"), groups]
    status: dict[str, Status] = {"high": "FAIL", "medium": "warn", "low": "warn"}
    return [*(Check(status[f.severity], f"security [{f.severity}] {f.key}",
                    f"{f.problem}. Fix: {f.fix}") for f in findings), groups]
