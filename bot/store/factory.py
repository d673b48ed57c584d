"""Which store a configuration asks for: SQLite at `[store] path` (the default, embedded), or
PostgreSQL when `MYCLAW_DATABASE_URL` or `[store] url` names one.

asyncpg is an optional extra (`pip install 'myclaw[postgres]'`), imported only when PostgreSQL
is configured, so an SQLite installation neither needs nor loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.core.errors import StoreError
from bot.store.pg_dialect import redact_url
from bot.store.protocol import Store
from bot.store.sqlite import Store as SqliteStore

if TYPE_CHECKING:
    from bot.config.settings import Config

INSTALL_HINT = "install the driver: pip install 'myclaw[postgres]'"


def make_store(config: Config) -> Store:
    """The configured store, not yet open (`async with make_store(config) as store:`)."""
    url = config.database_url
    if not url:
        return SqliteStore(config.store_path)
    return postgres_store(url)


def postgres_store(url: str, *, schema: str | None = None, migrate: bool = True) -> Store:
    try:
        from bot.store.postgres import PostgresStore
    except ImportError as exc:
        raise StoreError(f"the store is PostgreSQL but asyncpg is missing; {INSTALL_HINT}") from exc
    return PostgresStore(url, schema=schema, migrate=migrate)


async def open_store(config: Config) -> Store:
    """The configured store, opened and migrated."""
    return await make_store(config).open()


def store_location(config: Config) -> str:
    """Where the configured store is, safe to print (a URL's password is never shown)."""
    url = config.database_url
    return redact_url(url) if url else str(config.store_path)
