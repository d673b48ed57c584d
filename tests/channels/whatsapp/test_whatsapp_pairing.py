"""Pairing on WhatsApp by tap: a stranger's first message asks the approvers, whose copy carries
three reply buttons (Allow: read_only / Allow: supervised / Deny); a tap lets the stranger in
and tells them, and only an approver's tap counts."""

from __future__ import annotations

from tests.channels.whatsapp.conftest import ADA, BOB, EVE
from tests.fakes.whatsapp_server import Sent

SENDERS = {f"whatsapp:{ADA}": "supervised", f"whatsapp:{EVE}": "full", "unknown": "pairing"}


def is_pairing_question(message: Sent) -> bool:
    return message.to == EVE and message.type == "interactive" and any(
        i.startswith("c:/pair allow") for i in message.button_ids())


async def test_an_approver_lets_a_stranger_in_with_one_tap(bot, wa, fake_anthropic):
    started = await bot(SENDERS, approvals={"approvers": [f"whatsapp:{EVE}"]})
    wa.opened(EVE)
    await started.driver.text(BOB, "hello?", name="Bob")
    question = await wa.wait_for(is_pairing_question)
    assert f"whatsapp:{BOB}" in question.text and "Bob" in question.text
    assert question.button_titles() == ["Allow: read_only", "Allow: supervised", "Deny"]
    waiting = await wa.wait_for(lambda m: m.to == BOB)
    assert "asked the operator" in waiting.text and fake_anthropic.requests == []
    supervised = next(i for i in question.button_ids() if i.endswith(" supervised"))
    await started.driver.tap(EVE, supervised, question.wamid, title="Allow: supervised")
    await wa.wait_for(lambda m: m.to == BOB and "supervised" in m.text)
    assert await started.app.services.senders.autonomy(f"whatsapp:{BOB}") == "supervised"
    await started.driver.text(BOB, "now?")
    await wa.wait_for(lambda m: m.to == BOB and m.text == "ok: now?")


async def test_the_strangers_own_tap_on_the_question_changes_nothing(bot, wa, fake_anthropic):
    started = await bot(SENDERS, approvals={"approvers": [f"whatsapp:{EVE}"]})
    wa.opened(EVE)
    await started.driver.text(BOB, "hello?", name="Bob")
    question = await wa.wait_for(is_pairing_question)
    supervised = next(i for i in question.button_ids() if i.endswith(" supervised"))
    await started.driver.tap(BOB, supervised, question.wamid)
    # Still a stranger: the tap is a message like any other, and asks again for a decision.
    await wa.wait_for(lambda m: m.to == BOB and m.text.startswith("Still waiting for the operator"))
    assert str(await started.app.services.senders.autonomy(f"whatsapp:{BOB}")) != "supervised"
