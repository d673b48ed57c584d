"""Any bytes in, valid text out, from tools: a tool (as an MCP server's tool would) hands back
seeded strings with lone surrogates, NUL, random bytes, right-to-left and combining marks — in
values and in keys, trusted and untrusted, as results and as errors. The model is shown valid
text, the receipts verify, and both stores hold only valid text."""

from __future__ import annotations

import random
from typing import Any

from bot.core.events import CollectingSink, Done, IncomingMessage
from bot.core.tool import BaseTool, CallContext, ToolExternalError, ToolMeta
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.support.fuzz_text import fuzz_seed, invalid_strings, nasty_text, stored_text_is_valid
from tests.support.pg_support import on_both_backends

backend_name = on_both_backends()
CALLS = 5


class Nasty(BaseTool):
    """Returns (or fails with) whatever bytes the seed makes."""

    def __init__(self, rng: random.Random, untrusted: bool):
        self.rng = rng
        self.meta = ToolMeta(
            name="nasty_untrusted" if untrusted else "nasty", description="Returns bytes.",
            risk="low", schema={"type": "object", "additionalProperties": False,
                                "properties": {"fail": {"type": "boolean"}}},
            has_side_effects=False, returns_untrusted=untrusted, supports_dry_run=True,
            capability_required="test:nasty")

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        if args.get("fail"):
            raise ToolExternalError(nasty_text(self.rng), nasty_text(self.rng, 3))
        return {nasty_text(self.rng, 3): nasty_text(self.rng),
                "list": [nasty_text(self.rng, 4), {"deep": nasty_text(self.rng, 4)}]}


async def test_fuzzed_tool_results_and_errors_reach_the_model_and_the_store_as_valid_text(
        app_factory, fake_anthropic, store_backend):
    seed = fuzz_seed()
    rng = random.Random(seed)
    app = await app_factory({"senders": {"telegram:1": "full"}})
    for untrusted in (False, True):
        app.services.registry.register(Nasty(rng, untrusted), "tests")
    script = []
    for n in range(CALLS):
        name = "nasty_untrusted" if n % 2 else "nasty"
        script += [reply(tool_use(name, {"fail": n == CALLS - 1})), text(f"done {n}")]
    fake_anthropic.script(*script)
    sink = CollectingSink()
    for n in range(CALLS):
        await app.agent.handle(IncomingMessage(sender="telegram:1", chat="1", text=f"call {n}",
                                               channel="telegram"), sink)
    failure = f"(FUZZ_SEED={seed})"
    finals = [e.text for e in sink.of(Done)]
    assert finals == [f"done {n}" for n in range(CALLS)], f"{failure} {finals!r}"
    assert all(not invalid_strings(r.json) for r in fake_anthropic.requests), failure
    assert await stored_text_is_valid(app.services.store) == [], failure
    assert await app.services.receipts.verify_all() == [], failure
