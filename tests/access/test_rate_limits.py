"""Messages per minute per sender and level, through the real runtime with an injected clock:
`full` senders and the terminal are not limited by default, `supervised` and `read_only` ones
(strangers let in at a level too) are, and `[rate_limits] levels` sets a level's own rate."""

from __future__ import annotations

from bot.access.ratelimit import MessageRateLimiter, Rates
from bot.core.events import Done, Notice
from tests.runtime.test_runtime import say


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


LEVELS = {"telegram:1": "supervised", "telegram:2": "supervised", "telegram:3": "full",
          "telegram:4": "read_only"}


async def limited_app(app_factory, per_minute: int = 20, **rate_limits):
    app = await app_factory({"senders": {**LEVELS, "unknown": "read_only"},
                             "rate_limits": {"messages_per_minute": per_minute, **rate_limits}})
    clock = Clock()
    # The configured rates, with our clock.
    app.services.rate_limits = MessageRateLimiter(Rates.from_config(app.config["rate_limits"]),
                                                  clock)
    return app, clock


async def burst(app, clock, sender: str, count: int) -> int:
    """`count` messages from `sender` within one second; how many were answered."""
    answered = 0
    for i in range(count):
        clock.now += 1 / count
        sink = await say(app, f"message {i}", sender=sender, chat=sender.split(":")[1])
        answered += bool(sink.of(Done))
    return answered


async def test_thirty_messages_in_ten_seconds_are_held_to_the_rate_with_exactly_one_notice(
        app_factory, fake_anthropic):
    app, clock = await limited_app(app_factory)
    answered, told = 0, []
    for i in range(30):
        clock.now = 1000.0 + i * 10 / 30
        sink = await say(app, f"message {i}", sender="telegram:1", chat="1")
        answered += bool(sink.of(Done))
        told += [n.text for n in sink.of(Notice)]
    # A full bucket of 20, plus 20/min × 9.67 s ≈ 3.2 refilled: 23 messages get through.
    assert answered == 23 and len(fake_anthropic.requests) == 23
    (notice,) = told
    assert "at most 20 a minute" in notice and "send it again" in notice


async def test_a_rate_limited_sender_does_not_slow_down_another(app_factory, fake_anthropic):
    app, _clock = await limited_app(app_factory, per_minute=2)
    for i in range(4):
        await say(app, f"spam {i}", sender="telegram:1", chat="1")
    other = await say(app, "hello", sender="telegram:2", chat="2")
    assert other.text == "ok: hello" and not other.of(Notice)


async def test_after_a_calm_minute_the_sender_is_served_again_and_a_new_burst_is_told_again(
        app_factory, fake_anthropic):
    app, clock = await limited_app(app_factory, per_minute=2)
    for i in range(3):
        await say(app, f"burst {i}", sender="telegram:1", chat="1")
    clock.now += 60
    calm = await say(app, "later", sender="telegram:1", chat="1")
    assert calm.text == "ok: later"
    await say(app, "x", sender="telegram:1", chat="1")
    again = await say(app, "y", sender="telegram:1", chat="1")
    assert len(again.of(Notice)) == 1


async def test_commands_still_work_while_a_sender_is_rate_limited(app_factory, fake_anthropic):
    app, _clock = await limited_app(app_factory, per_minute=1)
    await say(app, "one", sender="telegram:1", chat="1")
    await say(app, "two", sender="telegram:1", chat="1")
    whoami = await say(app, "/whoami", sender="telegram:1", chat="1")
    assert "Sender: telegram:1" in whoami.of(Notice)[0].text


async def test_the_terminal_operator_is_not_rate_limited():
    limiter = MessageRateLimiter(1, clock=lambda: 0.0)
    assert all([(await limiter.admit("cli:local")).allowed for _ in range(50)])


async def test_full_senders_are_not_rate_limited_by_default(app_factory, fake_anthropic):
    app, clock = await limited_app(app_factory, per_minute=3)
    assert await burst(app, clock, "telegram:3", 10) == 10


async def test_read_only_senders_and_strangers_let_in_at_a_level_are_limited_by_default(
        app_factory, fake_anthropic):
    app, clock = await limited_app(app_factory, per_minute=3)
    assert await burst(app, clock, "telegram:4", 6) == 3
    assert await burst(app, clock, "telegram:99", 6) == 3    # unknown = "read_only"


async def test_a_level_can_have_its_own_rate_or_none(app_factory, fake_anthropic):
    app, clock = await limited_app(app_factory, per_minute=3,
                                   levels={"read_only": 1, "supervised": 0, "full": 2})
    assert await burst(app, clock, "telegram:4", 4) == 1
    assert await burst(app, clock, "telegram:1", 8) == 8
    assert await burst(app, clock, "telegram:3", 4) == 2


def test_the_terminal_is_never_limited_whatever_the_levels_say():
    rates = Rates(1, {"full": 5})
    assert rates.per_minute("cli:local", "full") == 0 and rates.per_minute("telegram:1", "full") == 5
    assert rates.per_minute("telegram:1", "supervised") == 1
