"""Session lifecycle hooks: every tool that has one is called; a broken or hung hook is logged
and never stops the bot or the other hooks."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.core.policy import Profile
from bot.core.tool import BaseTool, ToolMeta
from bot.toolbox.custom_tools import normalise_tool
from bot.toolbox.hooks import run_session_hooks
from bot.toolbox.registry import Registry


def meta(name: str) -> ToolMeta:
    return ToolMeta(name=name, description="A hooked tool.", capability_required="test",
                    schema={"type": "object", "properties": {}, "additionalProperties": False},
                    has_side_effects=False, risk="low")


class Hooked(BaseTool):
    def __init__(self, name: str, behaviour: str = "ok"):
        self.meta = meta(name)
        self.behaviour = behaviour
        self.seen: list[tuple[str, object]] = []
        self.entered = asyncio.Event()

    async def execute(self, ctx, **args):
        return {}

    async def on_session(self, event, ctx):
        self.seen.append((event, ctx))
        self.entered.set()
        if self.behaviour == "raise":
            raise RuntimeError(f"{self.meta.name} cannot clean up")
        if self.behaviour == "hang":
            await asyncio.Event().wait()


class Plain(BaseTool):
    meta = meta("plain")


def registry_of(*tools) -> Registry:
    registry = Registry(Profile())
    for tool in tools:
        registry.register(tool, "tests")
    return registry


@pytest.mark.parametrize("event", ["start", "new_session", "shutdown"])
async def test_every_tool_with_a_hook_gets_the_event_and_the_context(event, ctx):
    first, second = Hooked("first"), Hooked("second")
    failed = await run_session_hooks(registry_of(first, Plain(), second), event, ctx)
    assert failed == []
    assert first.seen == [(event, ctx)] and second.seen == [(event, ctx)]


async def test_a_failing_hook_is_logged_with_its_traceback_and_the_others_still_run(ctx, caplog):
    broken, after = Hooked("a_broken", "raise"), Hooked("b_after")
    with caplog.at_level(logging.ERROR, logger="bot.toolbox.hooks"):
        failed = await run_session_hooks(registry_of(broken, after), "shutdown", ctx)
    assert failed == ["a_broken"] and after.seen == [("shutdown", ctx)]
    (record,) = caplog.records
    assert "a_broken" in record.getMessage() and record.exc_info[0] is RuntimeError


async def test_a_hung_hook_times_out_without_blocking_the_others(ctx, caplog):
    hung, after = Hooked("a_hung", "hang"), Hooked("b_after")
    with caplog.at_level(logging.ERROR, logger="bot.toolbox.hooks"):
        failed = await run_session_hooks(registry_of(hung, after), "shutdown", ctx, timeout=0.05)
    assert failed == ["a_hung"] and after.seen == [("shutdown", ctx)]
    assert "did not finish" in caplog.records[0].getMessage()


async def test_cancelling_the_caller_is_not_swallowed(ctx):
    hung = Hooked("hung", "hang")
    running = asyncio.create_task(run_session_hooks(registry_of(hung), "start", ctx))
    await asyncio.wait_for(hung.entered.wait(), timeout=5)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running


async def test_an_unknown_event_is_a_bug_of_the_caller(ctx):
    with pytest.raises(ValueError, match="unknown session event"):
        await run_session_hooks(registry_of(Hooked("x")), "reboot", ctx)


async def test_the_hook_of_a_custom_tool_without_a_dry_run_is_called(ctx):
    seen = []

    class Custom:
        meta = ToolMeta(name="custom_hooked", description="A custom tool with a hook.",
                        schema={"type": "object", "properties": {}})

        async def execute(self, ctx, **args):
            return {}

        def on_session(self, event, ctx):  # a plain function is fine too
            seen.append(event)

    await run_session_hooks(registry_of(normalise_tool(Custom(), "custom.py")), "new_session", ctx)
    assert seen == ["new_session"]
