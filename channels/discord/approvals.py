"""Approval requests on Discord: the message, its buttons, and what a tap does.

The buttons are `ApprovalButton`s, a `discord.ui.DynamicItem` whose custom_id carries the request
id and the choice ("myclaw:ap:<id>:a|d|s"). A dynamic item matches by template, not by message,
so buttons keep working after a restart without re-registering one view per pending message.

A tap goes one way: the agent resolves it (it alone decides who may answer, and that a request
is answered once), and says why otherwise (not yours, second tap, expired, unknown id) — shown
ephemerally to the tapper. A won answer edits the request and continues the conversation in
the chat the request came from.
"""

from __future__ import annotations

import logging
import re
import time
from datetime import UTC, datetime
from typing import Any

import discord

from bot.core.approval_cards import ID_PATTERN, SUPERSEDED, ApprovalView, CallOutcome, message_ref
from bot.core.errors import MyclawError
from bot.core.events import AgentAPI
from bot.core.identity import Sender
from bot.language.catalogs import N_
from bot.language.translator import Translator
from channels.discord.approval_text import (
    discord_user_id,
    label_for,
    literal_block,
    mention,
    risk_text,
    summary_text,
)
from channels.discord.batch import continuation_texts, page_text, page_view, pages
from channels.discord.live import StreamSettings
from channels.discord.sink import ChannelOutlet, Outlet, TurnSink

log = logging.getLogger(__name__)

CUSTOM_ID_PREFIX = "myclaw:ap"
CUSTOM_ID_TEMPLATE = re.compile(rf"myclaw:ap:(?P<id>{ID_PATTERN}):(?P<choice>[ads])")
CHOICE_CODES = {"approve": "a", "deny": "d", "always": "s"}
CHOICES = {code: choice for choice, code in CHOICE_CODES.items()}
BUTTONS = {   # choice -> (label, style), in display order; labels in the reader's language
    "approve": (N_("Approve"), discord.ButtonStyle.success),
    "deny": (N_("Deny"), discord.ButtonStyle.danger),
    "always": (N_("Always"), discord.ButtonStyle.secondary),
}
NOT_RECORDED = N_("Your answer could not be recorded just now; please tap again in a moment.")
SUMMARY_LIMIT = 1500


def custom_id(approval_id: str, choice: str) -> str:
    return f"{CUSTOM_ID_PREFIX}:{approval_id}:{CHOICE_CODES[choice]}"


def sender_of(user: discord.abc.User) -> str:
    return Sender.of("discord", user.id)


def _header(approval: ApprovalView, tr: Translator, title: str = "", whole: bool = False) -> str:
    """`whole`: the request itself shows every character of the preview (split over several
    messages when long: a cut end could hide part of the call). The outcome, edited into the
    last of those messages once answered, says how much it leaves out. Every word but the
    preview is the reader's language."""
    summary = summary_text(approval.summary, tr)
    if not whole and len(summary) > SUMMARY_LIMIT:
        left_out = len(summary) - SUMMARY_LIMIT
        summary = summary[:SUMMARY_LIMIT] + "… " + tr.ngettext(
            "({n} more character: the whole preview was posted with the request)",
            "({n} more characters: the whole preview was posted with the request)", left_out)
    title = title or tr._("Approval needed")
    risk = tr._("risk: {risk}", risk=f"**{risk_text(approval.risk, tr)}**")
    asked = tr._("Requested by {who}", who=mention(approval.sender, tr))
    return f"🔐 **{title}** — `{approval.tool}` ({risk})\n{asked}\n{literal_block(summary)}"


def request_text(approval: ApprovalView, tr: Translator) -> str:
    expires = datetime.fromtimestamp(approval.expires_at, UTC)
    # Discord shows the time in each reader's own zone ("in 5 minutes"), in their client's
    # language; the words around it are ours.
    when = tr._("Expires {when}", when=discord.utils.format_dt(expires, "R"))
    return f"{_header(approval, tr, whole=True)}\n{when}"


def outcome_text(approval: ApprovalView | None, label: str, resolver: str | None,
                 tr: Translator, when: float | None = None) -> str:
    moment = discord.utils.format_dt(datetime.fromtimestamp(when or time.time(), UTC), "T")
    title = tr._("Approval request")
    head = _header(approval, tr, title) if approval is not None else f"🔐 **{title}**"
    if resolver and resolver != SUPERSEDED:
        return f"{head}\n" + tr._("{outcome} by {who} · {time}", outcome=f"**{label}**",
                                  who=mention(resolver, tr), time=moment)
    return f"{head}\n**{label}** · {moment}"


class ApprovalButton(discord.ui.DynamicItem[discord.ui.Button], template=CUSTOM_ID_TEMPLATE):
    """One of Approve / Deny / Always; rebuilt from its custom_id on every tap."""

    def __init__(self, approval_id: str, choice: str, label: str = ""):
        default, style = BUTTONS[choice]     # a label only matters when the button is sent
        button: discord.ui.Button = discord.ui.Button(label=(label or default)[:80], style=style,
                                                      custom_id=custom_id(approval_id, choice))
        super().__init__(button)
        self.approval_id = approval_id
        self.choice = choice

    @classmethod
    async def from_custom_id(cls, interaction: discord.Interaction, item: discord.ui.Item[Any],
                             match: re.Match[str], /) -> ApprovalButton:
        return cls(match["id"], CHOICES[match["choice"]])

    async def callback(self, interaction: discord.Interaction) -> None:
        await _desk(interaction).on_tap(interaction, self.approval_id, self.choice)


def _desk(interaction: discord.Interaction) -> ApprovalDesk:
    return interaction.client.approval_desk     # set by channels.discord.gateway.MyclawClient


def no_buttons() -> discord.ui.View:
    return discord.ui.View(timeout=None)


async def arm(message: Any, view: discord.ui.View) -> None:
    """Give a recorded request message its buttons (a failure leaves its commands, and the
    next restart gives them again)."""
    try:
        await message.edit(view=view)
    except discord.HTTPException:
        log.warning("discord: could not add the buttons to a request message", exc_info=True)


def buttons_for(approval: ApprovalView, tr: Translator) -> discord.ui.View:
    """Approve / Deny, and "Always: <what it covers>" when the request offers it: labels in the
    reader's language (at most Discord's 80 characters), custom ids the same in every one."""
    view = discord.ui.View(timeout=None)
    for choice, (label, _style) in BUTTONS.items():
        if choice == "always" and not approval.always:
            continue
        text = (tr._("Always: {scope}", scope=tr.say(approval.always)) if choice == "always"
                else tr._(label))
        view.add_item(ApprovalButton(approval.id, choice, text))
    return view


class ApprovalDesk:
    """Posts approval requests and handles taps for one Discord channel instance."""

    def __init__(self, agent: AgentAPI, approvals_in_dm: bool, stream: StreamSettings | None = None):
        self.agent = agent
        self.approvals_in_dm = approvals_in_dm
        self.stream = stream       # how a resumed conversation's answer is streamed
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

    def reader(self, outlet: Outlet) -> Translator:
        """The words of the person an outlet posts for (the requester, or an approver's DM)."""
        return self.agent.translator(Sender.of("discord", outlet.requester_id))

    async def post_request(self, approval: ApprovalView, outlet: Outlet) -> None:
        """Sent as text (its /approve and /deny commands work at once), recorded, then given
        its buttons: a message with buttons always has its request's record, so a restart
        can end them (one left without them is given them by the restart)."""
        self._remember(approval)
        tr = self.reader(outlet)
        message = await outlet.send_approval(request_text(approval, tr), no_buttons())
        if message is not None:
            ref = message_ref(message.channel.id, message.id)
            await self.agent.set_approval_message_ref(approval.id, ref, "discord")
            await arm(message, buttons_for(approval, tr))

    async def post_batch(self, approvals: tuple[ApprovalView, ...], outlet: Outlet) -> None:
        """The calls of one step: a page per 4 calls, long previews whole before their page."""
        for approval in approvals:
            self._remember(approval)
        tr = self.reader(outlet)
        for page in pages(approvals, tr):
            for text in continuation_texts(page, tr):
                await outlet.send_approval(text, discord.ui.View(timeout=None))
            calls = [CallOutcome(approval, "") for approval in page.calls]
            message = await outlet.send_approval(page_text(page, calls, len(approvals), tr),
                                                 no_buttons())
            if message is None:
                continue
            for approval in page.calls:
                await self.agent.set_approval_message_ref(
                    approval.id, message_ref(message.channel.id, message.id), "discord")
            await arm(message, page_view(page, calls, True, tr))

    async def on_tap(self, interaction: discord.Interaction, approval_id: str, choice: str, *,
                     every: bool = False) -> None:
        """A tap on a request's button, or (`every`) on a batch's "Approve all" / "Deny all"."""
        tapper = sender_of(interaction.user)
        # The tapper reads the answer to their tap: their client's language counts as a hint.
        tr = self.agent.translator(tapper, str(interaction.locale or ""))
        known = self._pending.get(approval_id)
        resolve = self.agent.resolve_batch if every else self.agent.resolve_approval
        # One compare-and-set in the store: milliseconds, well within Discord's 3 seconds.
        try:
            resolution = await resolve(approval_id, tapper, choice)
        except MyclawError:
            # Nothing was decided (the store refused); say so instead of leaving a silent button.
            await interaction.response.send_message(tr._(NOT_RECORDED), ephemeral=True)
            raise
        request = resolution.request
        if not resolution.ok and (request is None or resolution.status in (None, "pending")):
            # Refused and nothing to show on the request (not yours, unknown, altered).
            await interaction.response.send_message(
                tr.say(resolution.reason), ephemeral=True,
                allowed_mentions=discord.AllowedMentions.none())
            return
        await interaction.response.defer()            # acknowledged: the request message changes
        if resolution.ok and request is not None:
            for decided in resolution.decided or (request,):
                self._pending.pop(decided.id, None)
            # The conversation continues in the chat the request came from.
            sink = TurnSink(self._continuation_outlet(interaction, request.view()), self, self.stream)
            if self.agent.resume_approval(resolution, sink):
                await sink.outlet.typing_pulse()
        if request is not None and request.batch is not None:
            # A batch's messages are redrawn by the agent from the store, every copy at once.
            if not resolution.ok:
                await interaction.followup.send(tr.say(resolution.reason), ephemeral=True,
                                                allowed_mentions=discord.AllowedMentions.none())
            return
        # Show the outcome (also when a late tap finds it decided elsewhere or expired).
        view = request.view() if request is not None else known
        # The request message stays in its reader's language: the requester's in the chat of
        # the request, else the tapper's (an approver's DM copy).
        shown = tr
        if view is not None and str(interaction.channel_id) == view.chat:
            shown = self.agent.translator(view.sender)
        label = label_for(resolution.status, request.resolved_by if request else None, shown,
                          always=resolution.ok and choice == "always")
        resolver = request.resolved_by if request is not None else tapper
        when = request.resolved_at if request is not None else None
        await self._edit_request(interaction, outcome_text(view, label, resolver, shown, when))
        if not resolution.ok:
            await interaction.followup.send(tr.say(resolution.reason), ephemeral=True,
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
                             request: ApprovalView) -> ChannelOutlet:
        """Where the conversation continues: the chat the request came from."""
        client = interaction.client
        here = interaction.channel or interaction.message.channel
        in_guild = interaction.guild_id is not None
        requester_id = discord_user_id(request.sender) or interaction.user.id
        channel: Any = here
        if request.chat.isdigit() and int(request.chat) != here.id:
            # The buttons were sent by DM (approvals_in_dm); the turn lives in the guild channel.
            chat_id = int(request.chat)
            channel = client.get_channel(chat_id) or client.get_partial_messageable(chat_id)
            in_guild = True
        return ChannelOutlet(client, channel, requester_id, in_guild=in_guild,
                             approvals_in_dm=self.approvals_in_dm)
