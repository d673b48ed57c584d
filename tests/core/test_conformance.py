"""Every tool the default registry builds passes the conformance checks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx
import pytest

from bot.app import build_registry
from bot.core.ports import Network
from bot.core.tool import BaseTool, CallContext, ToolMeta
from tests.conftest import FAKE_ENV, make_config
from tests.support import conformance

CONFORMANCE_ENV = {**FAKE_ENV, "BRAVE_API_KEY": "brave-test-key"}


def default_registry(tmp_path: Path):
    return build_registry(make_config(tmp_path, env=CONFORMANCE_ENV))


def _tool_names() -> list[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return default_registry(Path(tmp)).names()


TOOL_NAMES = _tool_names()


def test_the_default_registry_builds_tools():
    assert TOOL_NAMES, "the default registry built no tools at all"


def test_tool_names_are_unique(tmp_path):
    conformance.check_unique_names(default_registry(tmp_path))


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_tool_metadata_is_well_formed(tmp_path, name):
    conformance.check_metadata(default_registry(tmp_path).get(name))


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_invalid_args_are_rejected_before_dispatch(tmp_path, name):
    conformance.check_invalid_args_rejected(default_registry(tmp_path), name)


@pytest.mark.parametrize("name", TOOL_NAMES)
async def test_dry_run_is_honest(tmp_path, name, store, services, ctx):
    registry = default_registry(tmp_path)
    services.registry = registry
    # Offline by construction: any DNS lookup or HTTP request a tool attempts is recorded and
    # refused, and the test fails if one was attempted at all.
    attempts: list[str] = []

    async def refusing_resolver(host: str) -> list[str]:
        attempts.append(f"dns {host}")
        raise OSError("no DNS in the conformance suite")

    def refusing_transport(request: httpx.Request) -> httpx.Response:
        attempts.append(f"http {request.url}")
        raise httpx.ConnectError("no network in the conformance suite", request=request)

    offline = dataclasses.replace(ctx, network=Network(
        resolver=refusing_resolver, http_transport=httpx.MockTransport(refusing_transport)))
    await conformance.check_dry_run(registry.get(name), offline, store)
    assert attempts == [], f"{name} reached for the network during the conformance run"


# --- the suite can fail ------------------------------------------------------------------


class SloppyWriter(BaseTool):
    """Claims a preview but writes during dry_run, and has a loose schema."""

    meta = ToolMeta(
        name="sloppy_writer", description="writes a file", capability_required="fs:write",
        schema={"type": "object", "properties": {"path": {"type": "string"}}},
        has_side_effects=True, risk="medium", supports_dry_run=True, returns_untrusted=False,
    )

    async def execute(self, ctx: CallContext, **args):
        (ctx.workspace / "written.txt").write_text("oops")
        return {"ok": True}

    async def dry_run(self, ctx: CallContext, **args):
        return await self.execute(ctx, **args)


class LyingReader(BaseTool):
    """Side-effect free, but its dry_run answers something else than execute."""

    meta = ToolMeta(
        name="LyingReader", description="", capability_required="",
        schema={"type": "object", "properties": {}, "additionalProperties": False},
        has_side_effects=False, risk="low", returns_untrusted=False,
    )

    async def execute(self, ctx: CallContext, **args):
        return {"value": 1}

    async def dry_run(self, ctx: CallContext, **args):
        return {"value": 2}


async def test_conformance_catches_a_tool_that_writes_during_dry_run(store, ctx):
    with pytest.raises(AssertionError, match="dry_run changed files"):
        await conformance.check_dry_run(SloppyWriter(), ctx, store)


def test_conformance_catches_a_loose_schema():
    with pytest.raises(AssertionError, match="additionalProperties"):
        conformance.check_metadata(SloppyWriter())


def test_conformance_catches_a_bad_name_and_empty_description():
    with pytest.raises(AssertionError, match="lower_snake_case"):
        conformance.check_metadata(LyingReader())


async def test_conformance_catches_a_dry_run_that_differs_from_execute(store, ctx):
    with pytest.raises(AssertionError, match="must return what execute returns"):
        await conformance.check_dry_run(LyingReader(), ctx, store)
