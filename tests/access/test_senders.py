"""Senders: autonomy from config, grants and Discord roles; pairing codes for strangers."""

from __future__ import annotations

import asyncio

import pytest

from bot.access.senders import CODE_ALPHABET, PairingError, Senders
from bot.store.sqlite import Store
from tests.conftest import make_config
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()

STRANGER = "telegram:4242"


class Clock:
    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def senders_for(tmp_path, store: Store, clock: Clock, **overrides) -> Senders:
    base = {
        "senders": {"telegram:1": "full", "discord:5": "read_only", "discord:6": "supervised"},
        "discord": {"roles": {"Admins": "full", "Helpers": "supervised"}},
        "pairing": {"code_ttl_seconds": 60, "max_codes_per_hour": 3},
    }
    base.update(overrides)
    return Senders(make_config(tmp_path, base), store, clock)


@pytest.fixture
def senders(tmp_path, store, clock) -> Senders:
    return senders_for(tmp_path, store, clock)


# --- autonomy ------------------------------------------------------------------------------


async def test_an_explicit_entry_gives_its_level(senders):
    assert await senders.autonomy("telegram:1") == "full"
    assert await senders.autonomy("cli:local") == "full"  # the built-in default entry


async def test_an_unknown_sender_gets_the_unknown_policy(tmp_path, store, clock):
    assert await senders_for(tmp_path, store, clock).autonomy(STRANGER) == "pairing"
    for policy in ("ignore", "read_only"):
        configured = senders_for(tmp_path, store, clock, senders={"unknown": policy})
        assert await configured.autonomy(STRANGER) == policy


async def test_discord_roles_raise_a_level_but_never_lower_it(senders):
    assert await senders.autonomy("discord:5", ["Helpers"]) == "supervised"
    assert await senders.autonomy("discord:5", ["Admins", "Helpers"]) == "full"
    assert await senders.autonomy("discord:6", ["Nobody", "Everyone"]) == "supervised"
    assert await senders.autonomy("discord:77", ["Helpers"]) == "supervised"
    assert await senders.autonomy("discord:77", ["Strangers"]) == "pairing"


async def test_roles_count_only_for_discord_senders(senders):
    assert await senders.autonomy(STRANGER, ["Admins"]) == "pairing"


async def test_a_config_entry_wins_over_a_pairing_grant(senders):
    code = await senders.pairing_code("discord:5")
    assert code is not None  # a config entry does not stop a code; the runtime never asks then
    await senders.approve(code, "full")
    assert await senders.autonomy("discord:5") == "read_only"


# --- pairing codes ---------------------------------------------------------------------------


async def test_a_stranger_gets_one_code_and_it_is_sent_only_once(senders):
    code = await senders.pairing_code(STRANGER)
    assert code is not None and len(code) == 8 and set(code) <= set(CODE_ALPHABET)
    assert await senders.pairing_code(STRANGER) is None
    listed = await senders.list_codes()
    assert [(c["code"], c["sender"]) for c in listed] == [(code, STRANGER)]


async def test_a_burst_of_messages_yields_a_single_code(senders):
    codes = await asyncio.gather(*(senders.pairing_code(STRANGER) for _ in range(10)))
    assert len([c for c in codes if c]) == 1


async def test_an_expired_code_is_replaced_and_no_longer_works(senders, clock):
    old = await senders.pairing_code(STRANGER)
    clock.now += 61
    assert await senders.list_codes() == []
    new = await senders.pairing_code(STRANGER)
    assert new is not None and new != old
    with pytest.raises(PairingError, match="expired"):
        await senders.approve(old, "full")
    assert await senders.autonomy(STRANGER) == "pairing"


async def test_codes_are_rate_limited_per_sender(senders, clock):
    issued = []
    for _ in range(3):
        issued.append(await senders.pairing_code(STRANGER))
        clock.now += 61
    assert all(issued)
    assert await senders.pairing_code(STRANGER) is None       # 4th within the hour
    assert await senders.pairing_code("telegram:other") is not None  # others unaffected
    clock.now += 3600
    assert await senders.pairing_code(STRANGER) is not None


async def test_approving_a_code_grants_the_level(senders, store):
    code = await senders.pairing_code(STRANGER)
    assert await senders.approve(code.lower(), "full") == STRANGER  # typed in lower case: fine
    assert await senders.autonomy(STRANGER) == "full"
    assert await senders.list_codes() == []
    assert await senders.pairing_code(STRANGER) is None  # paired senders get no more codes
    audit = await store.fetchone("SELECT * FROM audit WHERE decision = 'pair'")
    assert (audit["sender"], audit["outcome"]) == ("cli:local", "approved")
    assert STRANGER in audit["detail"]


async def test_a_code_works_only_once(senders):
    code = await senders.pairing_code(STRANGER)
    await senders.approve(code, "read_only")
    with pytest.raises(PairingError, match="already used"):
        await senders.approve(code, "full")
    assert await senders.autonomy(STRANGER) == "read_only"


@pytest.mark.parametrize("wrong", ["ZZZZZZZZ", "", "'; DELETE FROM granted_senders; --", "x" * 10_000])
async def test_a_wrong_code_does_nothing(senders, store, wrong):
    await senders.pairing_code(STRANGER)
    with pytest.raises(PairingError, match="unknown pairing code"):
        await senders.approve(wrong, "full")
    assert await store.fetchall("SELECT * FROM granted_senders") == []
    assert len(await senders.list_codes()) == 1


async def test_a_bad_level_is_refused_and_the_code_stays_usable(senders):
    code = await senders.pairing_code(STRANGER)
    with pytest.raises(PairingError, match="unknown level 'root'"):
        await senders.approve(code, "root")
    assert await senders.approve(code) == STRANGER
    assert await senders.autonomy(STRANGER) == "supervised"


async def test_a_denied_code_grants_nothing_and_cannot_be_approved(senders):
    code = await senders.pairing_code(STRANGER)
    assert await senders.deny(code) == STRANGER
    with pytest.raises(PairingError, match="denied"):
        await senders.approve(code, "full")
    assert await senders.autonomy(STRANGER) == "pairing"
