"""Count the words and lines of a text: a complete custom tool. Drop it in .myclaw/tools/."""

from bot.core.tool import BaseTool, CallContext, ToolMeta


class WordCount(BaseTool):
    meta = ToolMeta(
        name="word_count",
        description="Count the words and lines of a text the user gives.",
        schema={"type": "object", "additionalProperties": False, "required": ["text"],
                "properties": {"text": {"type": "string", "maxLength": 100_000}}},
        has_side_effects=False, risk="low", returns_untrusted=False, idempotent=True,
        capability_required="text:read",
    )
    examples = ({"text": "one two three"},)  # sample args for the conformance suite

    async def execute(self, ctx: CallContext, text: str) -> dict:
        await ctx.progress("Counting…")
        return {"words": len(text.split()), "lines": text.count("\n") + 1}


def build():
    return WordCount()
