"""Approval requests on Discord: the message, its buttons, and what a tap does.

The buttons are `ApprovalButton`s, a `discord.ui.DynamicItem` whose custom_id carries the request
id and the choice ("myclaw:ap:<id>:a|d|s"). A dynamic item matches by template, not by message,
so buttons keep working after a restart without re-registering one view per pending message.

Two layers decide who may tap: `ApprovalDesk.check_tapper` (the requester or a configured
approver; anyone else gets an ephemeral refusal before anything happens), and then the agent,
which enforces the same rule, resolves a request once and says why otherwise (second tap,
expired, unknown id). Whatever the agent says is shown ephemerally to the tapper.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import discord

from bot.approvals import SUPERSEDED
from bot.errors import MyclawError
from bot.events import AgentAPI, ApprovalView
from bot.identity import Sender
from channels.discord.sink import ChannelOutlet, Outlet, TurnSink

log = logging.getLogger(__name__)

CUSTOM_ID_PREFIX = "myclaw:ap"
CUSTOM_ID_TEMPLATE = re.compile(r"myclaw:ap:(?P<id>[A-Za-z0-9_-]{1,80}):(?P<choice>[ads])")
CHOICE_CODES = {"approve": "a", "deny": "d", "always": "s"}
CHOICES = {code: choice for choice, code in CHOICE_CODES.items()}
BUTTONS = {   # choice -> (label, style), in display order
    "approve": ("Approve", discord.ButtonStyle.success),
    "deny": ("Deny", discord.ButtonStyle.danger),
    "always": ("Always", discord.ButtonStyle.secondary),
}
NOT_YOURS = "Only the person who asked, or a configured approver, can answer this request."
NOT_RECORDED = "Your answer could not be recorded just now; please tap again in a moment."
NO_PREVIEW = "(preview not available for this tool)"
SUMMARY_LIMIT = 1500
DISCORD_SENDER = re.compile(r"discord:(\d{1,20})")


def custom_id(approval_id: str, choice: str) -> str:
    return f"{CUSTOM_ID_PREFIX}:{approval_id}:{CHOICE_CODES[choice]}"


def sender_of(user: discord.abc.User) -> str:
    return Sender.of("discord", user.id)


def mention(sender: str | None) -> str:
    """A sender shown in a message: a Discord user as a (non-pinging) mention, others as text."""
    if not sender:
        return "someone"
    match = DISCORD_SENDER.fullmatch(sender)
    return f"<@{match.group(1)}>" if match else discord.utils.escape_markdown(sender)


def literal_block(text: str) -> str:
    """`text` in a fenced code block that it cannot close: shown exactly as written.

    The summary holds text the model (or a web page it read) chose: a command, a path, a
    memory. As Markdown, `||…||` would hide part of it behind a spoiler, `[ok](url)` mask a
    link, `# ` or `-# ` resize it, and a backtick close the command's code span — so the person
    approving would not see what runs. A zero-width space after each backtick that another
    follows keeps any ``` inside from closing the block.
    """
    return "```\n" + re.sub(r"`(?=`)", "`\u200b", text) + "\n```"


def _header(approval: ApprovalView, title: str = "Approval needed", whole: bool = False) -> str:
    """`whole`: the request itself shows every character of the preview (split over several
    messages when long: a cut end could hide part of the call). The outcome, edited into the
    last of those messages once answered, says how much it leaves out."""
    summary = (approval.summary or NO_PREVIEW).strip()
    if not whole and len(summary) > SUMMARY_LIMIT:
        left_out = len(summary) - SUMMARY_LIMIT
        summary = (f"{summary[:SUMMARY_LIMIT]}… ({left_out:,} more characters: the whole "
                   "preview was posted with the request)")
    return (f"🔐 **{title}** — `{approval.tool}` (risk: **{approval.risk}**)\n"
            f"Requested by {mention(approval.sender)}\n{literal_block(summary)}")


def request_text(approval: ApprovalView) -> str:
    expires = datetime.fromtimestamp(approval.expires_at, UTC)
    return f"{_header(approval, whole=True)}\nExpires {discord.utils.format_dt(expires, 'R')}"


def outcome_text(approval: ApprovalView | None, label: str, resolver: str | None,
                 when: float | None = None) -> str:
    moment = discord.utils.format_dt(datetime.fromtimestamp(when or time.time(), UTC), "T")
    by = f" by {mention(resolver)}" if resolver and resolver != SUPERSEDED else ""
    head = _header(approval, "Approval request") if approval is not None else "🔐 **Approval request**"
    return f"{head}\n**{label}**{by} · {moment}"


def label_for(status: str | None, resolved_by: str | None, *, always: bool = False) -> str:
    if status == "expired":
        return "⌛ Cancelled (a newer message arrived)" if resolved_by == SUPERSEDED else "⌛ Expired"
    if status == "denied":
        return "❌ Denied"
    return "✅ Approved (always, this session)" if always else "✅ Approved"


class ApprovalButton(discord.ui.DynamicItem[discord.ui.Button], template=CUSTOM_ID_TEMPLATE):
    """One of Approve / Deny / Always; rebuilt from its custom_id on every tap."""

    def __init__(self, approval_id: str, choice: str, label: str = ""):
        default, style = BUTTONS[choice]
        button: discord.ui.Button = discord.ui.Button(label=(label or default)[:80], style=style,
                                                      custom_id=custom_id(approval_id, choice))
        super().__init__(button)
        self.approval_id = approval_id
        self.choice = choice

    @classmethod
    async def from_custom_id(cls, interaction: discord.Interaction, item: discord.ui.Item[Any],
                             match: re.Match[str], /) -> ApprovalButton:
        return cls(match["id"], CHOICES[match["choice"]])

    async def interaction_check(self, interaction: discord.Interaction, /) -> bool:
        return await _desk(interaction).check_tapper(interaction, self.approval_id)

    async def callback(self, interaction: discord.Interaction) -> None:
        await _desk(interaction).on_tap(interaction, self.approval_id, self.choice)


def _desk(interaction: discord.Interaction) -> ApprovalDesk:
    return interaction.client.approval_desk     # set by channels.discord.MyclawClient


def buttons_for(approval: ApprovalView) -> discord.ui.View:
    """Approve / Deny, and "Always: <what it covers>" when the request offers it."""
    view = discord.ui.View(timeout=None)
    for choice in BUTTONS:
        if choice == "always" and not approval.always:
            continue
        label = f"Always: {approval.always}" if choice == "always" else ""
        view.add_item(ApprovalButton(approval.id, choice, label))
    return view


class ApprovalDesk:
    """Posts approval requests and handles taps for one Discord channel instance."""

    def __init__(self, agent: AgentAPI, approvers: Iterable[str], approvals_in_dm: bool):
        self.agent = agent
        self.approvers = frozenset(approvers)
        self.approvals_in_dm = approvals_in_dm
        self._pending: dict[str, ApprovalView] = {}   # id -> request, to know requester and chat

    async def load_pending(self) -> None:
        """Requests still pending from before a restart: who asked, and in which chat."""
        for approval in await self.agent.pending_approvals("discord"):
            self._remember(approval)

    def _remember(self, approval: ApprovalView) -> None:
        now = time.time()
        for stale in [k for k, v in self._pending.items() if v.expires_at < now]:
            del self._pending[stale]
        self._pending[approval.id] = approval

    async def post_request(self, approval: ApprovalView, outlet: Outlet) -> None:
        self._remember(approval)
        message = await outlet.send_approval(request_text(approval), buttons_for(approval))
        if message is not None:
            await self.agent.set_approval_message_ref(approval.id,
                                                      f"{message.channel.id}:{message.id}", "discord")

    async def check_tapper(self, interaction: discord.Interaction, approval_id: str) -> bool:
        tapper = sender_of(interaction.user)
        known = self._pending.get(approval_id)
        # An id we do not know (expired, forged, from before a wipe) goes to the agent, which
        # knows the truth and explains; a known one is checked here first.
        if known is None or tapper == known.sender or tapper in self.approvers:
            return True
        await interaction.response.send_message(NOT_YOURS, ephemeral=True)
        return False

    async def on_tap(self, interaction: discord.Interaction, approval_id: str, choice: str) -> None:
        await interaction.response.defer()            # acknowledge within Discord's 3 seconds
        tapper = sender_of(interaction.user)
        known = self._pending.get(approval_id)
        sink = TurnSink(self._continuation_outlet(interaction, known), self)
        # The agent resolves at once and continues the conversation in the background, into
        # `sink`; nothing is emitted before this call returns, so the stored request (the
        # truth, also after a restart) can still decide where the conversation continues.
        try:
            resolution = await self.agent.resolve_approval(approval_id, tapper, choice, sink)
        except MyclawError:
            # Nothing was decided (the store refused); say so instead of leaving a silent button.
            await interaction.followup.send(NOT_RECORDED, ephemeral=True)
            raise
        request = resolution.request
        if resolution.ok:
            self._pending.pop(approval_id, None)
            if request is not None:
                sink.outlet = self._continuation_outlet(interaction, request.view())
            await sink.outlet.typing_pulse()
        if resolution.ok or (request is not None and resolution.status not in (None, "pending")):
            # Show the outcome (also when a late tap finds it decided elsewhere or expired).
            view = request.view() if request is not None else known
            label = label_for(resolution.status, request.resolved_by if request else None,
                              always=resolution.ok and choice == "always")
            resolver = request.resolved_by if request is not None else tapper
            when = request.resolved_at if request is not None else None
            await self._edit_request(interaction, outcome_text(view, label, resolver, when))
        if not resolution.ok:
            await interaction.followup.send(resolution.reason, ephemeral=True,
                                            allowed_mentions=discord.AllowedMentions.none())

    async def _edit_request(self, interaction: discord.Interaction, text: str) -> None:
        """Show the outcome on the request message and remove its buttons."""
        if interaction.message is None:
            return
        try:
            await interaction.message.edit(content=text[:2000], view=None,
                                           allowed_mentions=discord.AllowedMentions.none())
        except discord.HTTPException:
            log.warning("discord: could not update approval message %s", interaction.message.id,
                        exc_info=True)

    def _continuation_outlet(self, interaction: discord.Interaction,
                             known: ApprovalView | None) -> ChannelOutlet:
        """Where the conversation continues: the chat the request came from."""
        client = interaction.client
        here = interaction.channel or interaction.message.channel
        in_guild = interaction.guild_id is not None
        requester_id = interaction.user.id
        channel: Any = here
        if known is not None:
            match = DISCORD_SENDER.fullmatch(known.sender)
            requester_id = int(match.group(1)) if match else requester_id
            if known.chat.isdigit() and int(known.chat) != here.id:
                # The buttons were sent by DM (approvals_in_dm); the turn lives in the guild channel.
                chat_id = int(known.chat)
                channel = client.get_channel(chat_id) or client.get_partial_messageable(chat_id)
                in_guild = True
        return ChannelOutlet(client, channel, requester_id, in_guild=in_guild,
                             approvals_in_dm=self.approvals_in_dm)
