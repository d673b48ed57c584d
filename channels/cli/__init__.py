"""The terminal channel (see channels.cli.channel). prompt_toolkit is imported only when a person
is at the terminal (channels.cli.prompt)."""

from channels.cli.answers import batch_prompt, parse_answer
from channels.cli.channel import SENDER, TerminalChannel, create

__all__ = ["SENDER", "TerminalChannel", "batch_prompt", "create", "parse_answer"]
