"""Fakes of the remote services, served on 127.0.0.1 (on port 0: the system picks a free one, so
parallel test workers never collide)."""

import secrets

# How long a fake waits by default for something a passing test makes happen. Generous on
# purpose: with the suite on every core of a shared machine one step can take seconds, and a
# passing test never waits it out (a test that expects nothing to happen gives its own timeout).
EVENTUALLY = 30.0


def unique_suffix() -> str:
    """For a fake's default bot token: one PostgreSQL database serves every test worker, and the
    store's cross-process locks (one Telegram poller, one Discord shard per token) are named by
    the token, so two fakes must never share one."""
    return secrets.token_hex(6)
