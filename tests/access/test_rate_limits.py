"""Messages per minute per sender, through the real runtime with an injected clock."""

from __future__ import annotations

from bot.access.ratelimit import MessageRateLimiter
from bot.core.events import Done, Notice
from tests.runtime.test_runtime import say


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def limited_app(app_factory, per_minute: int = 20):
    app = await app_factory({"senders": {"telegram:1": "full", "telegram:2": "full"},
                             "rate_limits": {"messages_per_minute": per_minute}})
    clock = Clock()
    app.services.rate_limits = MessageRateLimiter(per_minute, clock)  # the clock is ours
    return app, clock


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
