"""Senders and levels are values: one parser for "channel:user", one ordered list of levels."""

from __future__ import annotations

import pytest

from bot.core.identity import LEVELS, OPERATOR, Level, Sender, Stranger, is_operator, parse_access


def test_a_sender_parses_into_its_channel_and_user_and_prints_back_the_same_text():
    sender = Sender.parse("telegram:42")
    assert (sender.channel, sender.user_id) == ("telegram", "42")
    assert str(sender) == "telegram:42"
    assert Sender.of("discord", 7) == "discord:7"
    assert Sender.parse("cli:local").channel == "cli"


def test_a_user_id_may_itself_contain_a_colon():
    assert Sender.parse("cli:a:b").user_id == "a:b"


@pytest.mark.parametrize("text", ["telegram", ":42", "telegram:", ""])
def test_text_that_is_not_a_sender_is_a_clear_value_error(text):
    with pytest.raises(ValueError, match="expected channel:user_id"):
        Sender.parse(text)


def test_a_sender_is_frozen():
    with pytest.raises(AttributeError):
        Sender.parse("cli:local").channel = "telegram"  # type: ignore[misc]


def test_levels_are_ordered_read_only_then_supervised_then_full():
    assert Level.READ_ONLY < Level.SUPERVISED < Level.FULL
    assert max(Level.SUPERVISED, Level.FULL, Level.READ_ONLY) is Level.FULL
    assert min(Level.FULL, Level("supervised")) is Level.SUPERVISED
    assert LEVELS == ("read_only", "supervised", "full")
    assert Level.FULL == "full"  # the text form config and store rows keep


def test_an_unknown_level_names_the_ones_that_exist():
    with pytest.raises(ValueError, match="read_only, supervised, full"):
        Level.parse("admin")


def test_the_stranger_outcomes_are_not_levels():
    assert parse_access("pairing") is Stranger.PAIRING
    assert parse_access("ignore") is Stranger.IGNORE
    assert parse_access("read_only") is Level.READ_ONLY
    assert not isinstance(Stranger.PAIRING, Level)


async def test_the_sender_lookup_gives_a_level_or_a_stranger_outcome(config, store):
    from bot.access.senders import Senders

    senders = Senders(config, store)
    assert await senders.autonomy("cli:local") is Level.FULL
    assert await senders.autonomy("telegram:999") is Stranger.PAIRING


@pytest.mark.parametrize(("sender", "operator"), [
    ("cli:local", True), ("console:operator", True), ("telegram:1", False),
    ("discord:cli", False), ("not a sender", False),
])
def test_the_operator_is_whoever_types_in_the_terminal_or_signs_in_to_the_console(sender, operator):
    assert is_operator(sender) is operator


def test_the_terminal_sender_is_the_operator_and_in_the_terminal():
    assert OPERATOR.is_operator and OPERATOR.in_terminal and str(OPERATOR) == "cli:local"
    assert not Sender("console", "operator").in_terminal
