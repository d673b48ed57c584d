"""What a long-running process does before it serves: its models' keys checked, the bot's
secrets out of the environment children inherit, and the heap built at start-up frozen out of
the collector's reach. Used by `myclaw run` and `myclaw chat` (and the benches, as they start)."""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from bot.config.settings import SECRET_ENV_VARS, Config, model_names
from bot.core.errors import ConfigError
from bot.llm.models import Models

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4


def harden_process() -> None:
    """Keep the bot's secrets away from the commands its tools run.

    The secrets were copied into the Config when it was loaded; dropping them from os.environ
    means no child process can inherit them, and (on Linux) a non-dumpable process cannot have
    its memory or /proc/<pid>/environ read by other processes of the same user — such as a
    shell command the agent runs.
    """
    for name in SECRET_ENV_VARS:
        os.environ.pop(name, None)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            log.warning("could not make the process non-dumpable (errno %d)", ctypes.get_errno())


@contextmanager
def long_lived_heap() -> Iterator[None]:
    """Around the start-up of a long-running process: no cyclic collections while it builds what
    lives as long as the process (the libraries' models — anthropic's alone are hundreds of
    thousands of objects — the registry, the app), then all of that is frozen out of the
    collector's reach, so later full collections (in every turn) stop re-scanning it. Measured
    with bench/startup.py: start-up work after the imports roughly halves."""
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        gc.enable()


def require_api_key(config: Config) -> None:
    # supra_model only serves the supra_llm tool, which says so itself when its key is missing.
    needed = [(where, name) for where, name in model_names(config)
              if where != "[agent] supra_model"]
    missing = Models(config).missing_keys(needed, config)
    other = [m for m in missing if m[0] != "ANTHROPIC_API_KEY"]
    if other:
        env, model, where = other[0]
        raise ConfigError(f"{env} is not set: the model {model!r} ({where}) needs it. Export "
                          f"it (export {env}=...) and run again.")
    if missing:
        raise ConfigError(
            "ANTHROPIC_API_KEY is not set. Export your Anthropic API key "
            "(export ANTHROPIC_API_KEY=sk-ant-...) and run again. Optional: TELEGRAM_BOT_TOKEN "
            "and/or DISCORD_BOT_TOKEN to enable those channels; without them the terminal "
            "channel opens.")
