"""Several calls asked in one model step, on Discord: one message listing each call with its
preview, "Approve all" / "Deny all", and Approve / Deny (and "Always: …" where offered) per call.

A message holds 5 rows of buttons: the first is "Approve all" / "Deny all", then one row per
call, so a page shows at most 4 calls and a longer batch is shown on several messages (pages),
each with the "all" buttons. Each call's own buttons are the single request's
(`ApprovalButton`), so a tap on one goes through exactly the path of a request asked alone; the
"all" buttons are `BatchButton`s ("myclaw:ab:<batch>:a|d"). A preview that does not fit its page
(2000 characters, with room kept for the outcomes) is posted whole before it, over as many
messages as it takes: a preview is never cut. The layout is a function of the calls and the
reader's language alone, so the message showing a call can be redrawn as answers arrive.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import discord

from bot.core.approval_cards import (
    ID_PATTERN,
    SUPERSEDED,
    ApprovalResolved,
    ApprovalView,
    CallOutcome,
    batch_heading,
    previews_moved_out,
)
from bot.language.translator import Translator
from channels.discord.approval_text import label_for, literal_block, mention, risk_text, summary_text

BATCH_TEMPLATE = re.compile(rf"myclaw:ab:(?P<id>{ID_PATTERN}):(?P<choice>[ad])")
CHOICES = {"a": "approve", "d": "deny"}
CALL_CODES = {"approve": "a", "deny": "d", "always": "s"}   # as channels.discord.approvals
CALL_STYLES = {"approve": discord.ButtonStyle.success, "deny": discord.ButtonStyle.danger,
               "always": discord.ButtonStyle.secondary}
CALLS_PER_PAGE = 4            # row 1: the "all" buttons; rows 2-5: one call each
MESSAGE_LIMIT = 2000
OUTCOME_CHARS = 100           # room kept per call for the outcome line an answer adds later
PREVIEW_CHARS = 1800          # one continuation message's share of a long preview


@dataclass(frozen=True)
class Page:
    calls: tuple[ApprovalView, ...]
    first: int                      # the number shown for its first call (1-based)
    outside: frozenset[str]         # ids whose preview is posted before the page


class BatchButton(discord.ui.DynamicItem[discord.ui.Button], template=BATCH_TEMPLATE):
    """"Approve all" / "Deny all"; rebuilt from its custom_id on every tap."""

    def __init__(self, batch: str, choice: str, label: str = ""):
        default, style = {"approve": ("Approve all", discord.ButtonStyle.success),
                          "deny": ("Deny all", discord.ButtonStyle.danger)}[choice]
        label = label or default   # a label only matters when the button is sent
        button: discord.ui.Button = discord.ui.Button(
            label=label, style=style, custom_id=f"myclaw:ab:{batch}:{choice[0]}", row=0)
        super().__init__(button)
        self.batch = batch
        self.choice = choice

    @classmethod
    async def from_custom_id(cls, interaction: discord.Interaction, item: discord.ui.Item[Any],
                             match: re.Match[str], /) -> BatchButton:
        return cls(match["id"], CHOICES[match["choice"]])

    async def callback(self, interaction: discord.Interaction) -> None:
        await interaction.client.approval_desk.on_tap(interaction, self.batch, self.choice,
                                                      every=True)


def pages(views: Sequence[ApprovalView], tr: Translator) -> list[Page]:
    """The batch cut into pages; in each, the longest previews move out until the page fits."""
    return [_page(views, start, tr) for start in range(0, len(views), CALLS_PER_PAGE)]


def _page(views: Sequence[ApprovalView], start: int, tr: Translator) -> Page:
    calls = tuple(views[start:start + CALLS_PER_PAGE])
    pending = [CallOutcome(view, "") for view in calls]
    budget = MESSAGE_LIMIT - OUTCOME_CHARS * len(calls)

    def fits(outside: frozenset[str]) -> bool:
        return len(page_text(Page(calls, start + 1, outside), pending, len(views), tr)) <= budget
    outside = previews_moved_out(calls, fits)
    if outside is None:   # cannot happen with 4 calls: headers alone are far below the limit
        outside = frozenset(view.id for view in calls)
    return Page(calls, start + 1, outside)


def continuation_texts(page: Page, tr: Translator) -> list[str]:
    """The previews that did not fit the page, whole, in messages posted before it."""
    texts: list[str] = []
    for number, view in enumerate(page.calls, start=page.first):
        if view.id not in page.outside:
            continue
        chunks, rest = [], summary_text(view.summary, tr)
        while rest:
            size = PREVIEW_CHARS
            while len(literal_block(rest[:size])) > PREVIEW_CHARS and size > 1:
                size //= 2   # escaped backticks take more room
            chunks.append(rest[:size])
            rest = rest[size:]
        texts.extend(tr._("🔎 Preview {n}/{total} of call {number} ({tool}) waiting for approval:",
                           n=n, total=len(chunks), number=number, tool=f"`{view.tool}`")
                     + f"\n{literal_block(chunk)}" for n, chunk in enumerate(chunks, start=1))
    return texts


def page_text(page: Page, calls: Sequence[CallOutcome], total: int, tr: Translator) -> str:
    """The page: each call with its preview and, once answered, its outcome."""
    first = calls[0].approval
    pending, title, span = batch_heading(page.first, calls, total, tr)
    asked = tr._("Requested by {who}", who=mention(first.sender, tr))
    lines = [f"🔐 **{title}**{span}\n{asked}"]
    for number, call in enumerate(calls, start=page.first):
        view = call.approval
        summary = summary_text(view.summary, tr)
        if view.id in page.outside:
            summary = tr._("(the full preview of call {number} is in the messages above)",
                           number=number)
        risk = tr._("risk: {risk}", risk=f"**{risk_text(view.risk, tr)}**")
        line = f"**{number}.** `{view.tool}` ({risk})\n{literal_block(summary)}"
        if call.choice:
            line += f"\n{_outcome_line(call, tr)}"
        lines.append(line)
    if pending:
        expires = datetime.fromtimestamp(first.expires_at, UTC)
        lines.append(tr._("Expires {when}", when=discord.utils.format_dt(expires, "R")))
    return "\n".join(lines)


def page_view(page: Page, calls: Sequence[CallOutcome], batch_pending: bool,
              tr: Translator) -> discord.ui.View | None:
    """"Approve all" / "Deny all" while any call of the batch waits; a row per pending call.
    Labels in the reader's language, custom ids the same in every one."""
    view = discord.ui.View(timeout=None)
    if batch_pending:
        for choice, label in (("approve", tr._("Approve all")), ("deny", tr._("Deny all"))):
            view.add_item(BatchButton(calls[0].approval.batch, choice, label))
    for row, (number, call) in enumerate(enumerate(calls, start=page.first), start=1):
        if call.choice:
            continue
        approval = call.approval
        for choice in ("approve", "deny", "always"):
            if choice == "always" and not approval.always:
                continue
            label = {"approve": tr._("Approve {number}", number=number),
                     "deny": tr._("Deny {number}", number=number)}.get(choice) or \
                tr._("Always {number}: {scope}", number=number, scope=tr.say(approval.always))
            # The single request's custom_id: its tap is an `ApprovalButton`'s, matched by id.
            view.add_item(discord.ui.Button(
                label=label[:80], style=CALL_STYLES[choice], row=row,
                custom_id=f"myclaw:ap:{approval.id}:{CALL_CODES[choice]}"))
    return view if view.children else None


def redrawn(outcome: ApprovalResolved, tr: Translator) -> tuple[str, discord.ui.View | None]:
    """The page showing `outcome.approval`, as the batch stands now."""
    views = [call.approval for call in outcome.batch]
    page = next((p for p in pages(views, tr) if any(v.id == outcome.approval.id for v in p.calls)),
                Page((outcome.approval,), 1, frozenset()))
    ids = {view.id for view in page.calls}
    calls = [call for call in outcome.batch if call.approval.id in ids]
    pending = any(not call.choice for call in outcome.batch)
    return page_text(page, calls, len(views), tr), page_view(page, calls, pending, tr)


def _outcome_line(call: CallOutcome, tr: Translator) -> str:
    status = {"deny": "denied", "expire": "expired"}.get(call.choice, "approved")
    resolver = None if call.choice == "expire" else call.resolver
    label = label_for(status, call.resolver if call.choice == "expire" else resolver, tr)
    if call.choice == "expire" and call.resolver != SUPERSEDED:
        label = tr._("{outcome} — nothing ran", outcome=label)
    moment = discord.utils.format_dt(datetime.fromtimestamp(call.resolved_at or 0, UTC), "T")
    if resolver:
        return tr._("{outcome} by {who} · {time}", outcome=f"**{label}**",
                    who=mention(resolver, tr), time=moment)
    return f"**{label}** · {moment}"
