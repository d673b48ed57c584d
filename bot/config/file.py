"""Reading the config file: every way it can fail is one `ConfigError` line naming the file.

A directory, an unreadable or huge file, UTF-16 text (what Notepad saves as "Unicode"), bytes that are not
UTF-8, broken or absurdly nested TOML. A UTF-8 byte-order mark is accepted.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from bot.core.errors import ConfigError

MAX_BYTES = 1_000_000  # the documented example with every key is ~10 KB


def read_toml(path: Path) -> dict[str, Any]:
    """The file's tables; every way reading or parsing it can fail is one ConfigError line."""
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, not a config file")
    try:
        with path.open("rb") as file:  # bounded: `--config /dev/zero` must not eat the memory
            data = file.read(MAX_BYTES + 1)
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: config file not found") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from exc
    if len(data) > MAX_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_BYTES // 1_000_000} MB: not a config file")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"{path}: the file is UTF-16 text (\"Unicode\" in Notepad); "
                          "save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")  # a UTF-8 byte-order mark is harmless: accept it
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); "
                          "save it as UTF-8") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except RecursionError as exc:
        raise ConfigError(f"{path}: not valid TOML: arrays or tables nested too deeply") from exc
