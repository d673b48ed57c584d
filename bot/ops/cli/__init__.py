"""The `myclaw` operator command line."""

from bot.ops.cli.main import main

__all__ = ["main"]
