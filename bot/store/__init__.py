"""The Store (SQLite, PostgreSQL), migrations, dialect, invalidation, and the owners of the
cross-cutting tables (audit, notices). May import: core, config.
"""
