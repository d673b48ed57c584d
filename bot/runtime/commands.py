"""The commands every channel shares: /start /help /whoami /tools /new /stop /undo /usage
/approve ID /deny ID. Channels only forward the text; the answers are Notices.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from bot.access.senders import PairingError
from bot.approvals.grants import GrantError
from bot.approvals.records import ANSWER_LABELS
from bot.config.settings import Config
from bot.core.events import Button, IncomingMessage, Notice, Sink
from bot.jobs.jobs import JobError
from bot.jobs.schedule import ScheduleError, local_time, zone
from bot.runtime.services import Services
from bot.runtime.voice import VoiceReplies


class Agent(Protocol):
    """What the commands ask of the agent (`bot.runtime.agent.Agent`)."""

    config: Config
    services: Services
    voice: VoiceReplies

    async def session_id(self, message: IncomingMessage) -> str: ...
    async def new_session(self, message: IncomingMessage, level: str) -> str: ...
    def stop(self, message: IncomingMessage) -> Any: ...
    def running_for(self, message: IncomingMessage) -> str | None: ...
    def is_approver(self, sender: str) -> bool: ...
    def shared_with_others(self, message: IncomingMessage) -> bool: ...
    async def tell_paired(self, code: str, text: str) -> None: ...
    async def resolve_approval(self, *args: Any, **kwargs: Any) -> Any: ...
    async def resume_approval(self, *args: Any, **kwargs: Any) -> Any: ...
    async def _queued(self, message: IncomingMessage, sink: Sink,
                      work: Callable[[], Awaitable[None]]) -> Any: ...


Handler = Callable[[Agent, IncomingMessage, str, Sink, str], Awaitable[None]]

DESCRIPTIONS: list[tuple[str, str]] = [
    ("start", "Who you are and how to get started"),
    ("help", "What I can do and the commands"),
    ("whoami", "Your sender id, autonomy level and tool count"),
    ("tools", "The tools you can use"),
    ("new", "Start a fresh conversation"),
    ("stop", "Cancel what I am doing"),
    ("undo", "Revert the last change I made in this conversation"),
    ("grants", "What your \"Always\" taps allow, with Revoke buttons"),
    ("jobs", "Your reminders and scheduled jobs"),
    ("pair", "Approvers: let someone in (/pair allow CODE LEVEL, /pair deny CODE)"),
    ("timezone", "Show or set your time zone for schedules"),
    ("voice", "Answers by voice too: /voice on, off or auto"),
    ("usage", "Your model spend today and this month, against your limits"),
]

# Shown by /help but not put in the platforms' command menus: they need an argument.
WITH_ARGUMENT: list[tuple[str, str]] = [
    ("approve ID", "Approve a request that waits for you"),
    ("deny ID", "Deny a request that waits for you"),
]
# "/word" or "/word@bot" followed by a space or the end: a command. "/etc/hosts is what?" is not.
COMMAND_SHAPE = re.compile(r"/[A-Za-z][A-Za-z0-9_]{0,31}(@[A-Za-z0-9_]+)?(?=\s|$)")
SUMMARY_CHARS = 100
# A sentence ends at . ! or ? followed by a space and a capital letter or a `name` ("e.g. a" and
# "e.g. 'X'" go on).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`])")


def descriptions() -> list[tuple[str, str]]:
    return list(DESCRIPTIONS)


def parse(text: str) -> tuple[str, str]:
    head, _, rest = text.strip().partition(" ")
    name = head[1:].split("@", 1)[0].lower()
    return name, rest.strip()


async def run(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink) -> bool:
    """Handle a command; False when the text is not one of ours (it goes to the model).

    A command-shaped text we do not know gets "unknown command" in a private chat. In a group
    it may be another bot's command, so unless it was addressed to us (`/x@us`; the channels
    drop commands addressed to other bots) it is ignored."""
    name, arg = parse(message.text)
    handler = HANDLERS.get(name)
    if handler is not None:
        await handler(agent, message, autonomy, sink, arg)
        return True
    shape = COMMAND_SHAPE.match(message.text.strip())
    if shape is None:
        return False
    if not message.is_group or shape.group(1):
        await sink.emit(Notice(f"Unknown command /{name}: see /help for the commands."))
    return True


def summary(description: str, limit: int = SUMMARY_CHARS) -> str:
    """The first sentence, without its full stop, cut at a word boundary when too long."""
    first = _SENTENCE_END.split(description.strip(), 1)[0].strip()
    first = first[:-1] if first.endswith(".") else first
    if len(first) <= limit:
        return first
    head = first[:limit - 1]
    # Prefer ending before a parenthesis or after a clause; else at the last whole word.
    clause = max(head.rfind(" ("), head.rfind(", "), head.rfind(": "))
    if clause >= limit // 2:
        head = head[:clause]
    elif " " in head:
        head = head.rsplit(" ", 1)[0]
    return head.rstrip(" ,;:(") + "…"


def _tools_text(agent: Agent, message: IncomingMessage, autonomy: str) -> list[str]:
    tools = agent.services.registry.list_for_sender(message.sender, autonomy)
    return [f"• {t.meta.name} — {summary(t.meta.description)}" for t in tools]


async def _start(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    await sink.emit(Notice(
        f"Hi! I'm myclaw, your personal agent. You are {message.sender} with autonomy "
        f"'{autonomy}'. Just write to me; anything risky waits for your approval.\n"
        "Send /help to see the commands."))


async def _help(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    lines = [f"/{name} — {text}" for name, text in [*DESCRIPTIONS, *WITH_ARGUMENT]]
    await sink.emit(Notice("Write what you need in plain words; I use tools when it helps and "
                           "ask before anything risky.\n\n" + "\n".join(lines)))


TOOLS_OFF = "Tools are off for this model ({model}): it cannot call them, so I answer in words only."


def _tools_off(agent: Agent) -> str | None:
    """The sentence saying the model in use takes no tools, or None when it does."""
    llm, model = agent.services.llm, agent.prompt.model
    if llm is None or llm.tools_enabled(model):
        return None
    return TOOLS_OFF.format(model=model)


async def _whoami(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    count = len(agent.services.registry.list_for_sender(message.sender, autonomy))
    off = _tools_off(agent)
    tools = f"{count}" if off is None else f"{count} (off: {off})"
    await sink.emit(Notice(f"Sender: {message.sender}\nAutonomy: {autonomy}\nTools: {tools}"))


async def _tools(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    off = _tools_off(agent)
    if off is not None:
        await sink.emit(Notice(off))
        return
    lines = _tools_text(agent, message, autonomy)
    await sink.emit(Notice("Your tools:\n" + "\n".join(lines) if lines else "You have no tools."))


async def _new(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    # A conversation everyone in a group shares is reset for all of them (with everyone's
    # grants and waiting requests): that is an approver's call, not any member's.
    if agent.shared_with_others(message) and not agent.is_approver(message.sender):
        await sink.emit(Notice("Everyone in this chat shares this conversation, so only an "
                               "approver can start a fresh one. Your own \"Always\" grants: "
                               "/grants."))
        return
    agent.stop(message)
    await agent.new_session(message, autonomy)
    await sink.emit(Notice("Started a fresh conversation."))


async def _stop(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    owner = agent.running_for(message)
    if owner is None:
        await sink.emit(Notice("Nothing is running."))
    elif owner not in ("", message.sender) and not agent.is_approver(message.sender):
        await sink.emit(Notice("What I am doing now was asked by someone else: only they or an "
                               "approver can stop it."))
    else:
        agent.stop(message)
    # When something was stopped, the turn itself reports "Stopped." once it has unwound.


async def _undo(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    async def work() -> None:
        session_id = await agent.session_id(message)
        ctx = agent.services.call_context(sender=message.sender, level=autonomy,
                                          session_id=session_id, chat=message.chat,
                                          audience=agent.audience(message))
        text = await agent.services.undo.undo_last(session_id, agent.services.registry, ctx)
        await sink.emit(Notice(text))
    await agent._queued(message, sink, work)


async def _jobs(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    jobs = agent.services.jobs
    verb, _, rest = arg.partition(" ")
    if verb in ("cancel", "resume"):
        change = jobs.cancel if verb == "cancel" else jobs.resume
        try:
            job = await change(rest.strip(), message.sender)
        except JobError as exc:
            await sink.emit(Notice(f"Cannot {verb} that job: {exc}"))
            return
        done = "cancelled" if verb == "cancel" else "resumed"
        await sink.emit(Notice(f"Job '{job.name}' {done}."))
        return
    if verb:
        await sink.emit(Notice("Usage: /jobs, /jobs cancel ID or /jobs resume ID"))
        return
    listing = await jobs.for_owner(message.sender)
    if not listing:
        await sink.emit(Notice("You have no scheduled jobs. Ask me, e.g. \"remind me in 20 "
                               "minutes to stretch\" or \"every Monday at 8 summarise my notes\"."))
        return
    lines, buttons = [], []
    for job in listing:
        when = (f"next {local_time(job.next_run, job.schedule.timezone)}"
                if job.status == "active" and job.next_run else job.status)
        last = f"; last: {job.last_outcome}" if job.last_outcome else ""
        lines.append(f"• {job.name} [{job.id}] — {job.schedule.describe()}; {when}{last}")
        buttons.append(Button(f"Cancel: {job.name[:24]}", f"/jobs cancel {job.id}"))
        if job.status == "paused":
            buttons.append(Button(f"Resume: {job.name[:24]}", f"/jobs resume {job.id}"))
    await sink.emit(Notice("Your jobs:\n" + "\n".join(lines), buttons=tuple(buttons)))


async def _timezone(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink,
                    arg: str) -> None:
    preferences, default = agent.services.preferences, agent.config["agent"]["timezone"]
    if not arg:
        current = await preferences.timezone_of(message.sender, default)
        await sink.emit(Notice(f"Your time zone is {current}. Change it with /timezone "
                               "Europe/Rome (any IANA name)."))
        return
    try:
        zone(arg.split()[0])
    except ScheduleError as exc:
        await sink.emit(Notice(str(exc)))
        return
    await preferences.set_timezone(message.sender, arg.split()[0])
    await sink.emit(Notice(f"Time zone set to {arg.split()[0]}. New schedules use it."))


async def _grants(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink,
                  arg: str) -> None:
    grants = agent.services.approvals.grants
    verb, _, rest = arg.partition(" ")
    if verb == "revoke":
        try:
            grant = await grants.revoke(rest.strip(), message.sender)
        except GrantError as exc:
            await sink.emit(Notice(f"Cannot revoke: {exc}"))
            return
        await sink.emit(Notice(f"Revoked: {grant.description}. I will ask again."))
        return
    if verb:
        await sink.emit(Notice("Usage: /grants or /grants revoke ID"))
        return
    session_id = await agent.session_id(message)
    mine = await grants.active_for(message.sender, session_id)
    if not mine:
        await sink.emit(Notice("No \"Always\" grants in this conversation: I ask before every "
                               "call that needs approval."))
        return
    lines = [f"• {g.description} — until {local_time(g.expires_at, 'UTC')} [{g.id}]" for g in mine]
    buttons = tuple(Button(f"Revoke: {g.tool} {g.scope_label}"[:40], f"/grants revoke {g.id}")
                    for g in mine)
    await sink.emit(Notice("What runs without asking in this conversation (until /new):\n"
                           + "\n".join(lines), buttons=buttons))


async def _pair(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink,
                arg: str) -> None:
    senders = agent.services.senders
    if not agent.is_approver(message.sender):
        await sink.emit(Notice("Only an approver can let people in."))
        return
    words = arg.split()
    allow = len(words) in (2, 3) and words[0] == "allow"
    if not (allow or (len(words) == 2 and words[0] == "deny")):
        await sink.emit(Notice("Usage: /pair allow CODE [read_only|supervised|full] or /pair deny CODE"))
        return
    code, level = words[1], (words[2] if len(words) == 3 else "supervised")
    try:
        if allow:
            stranger = await senders.approve(code, level, by=message.sender)
        else:
            stranger = await senders.deny(code, by=message.sender)
    except PairingError as exc:
        await sink.emit(Notice(f"Cannot do that: {exc}"))
        return
    if allow:
        await sink.emit(Notice(f"Let {stranger} in as {level}."))
        await agent.tell_paired(code, f"✅ You're in! The operator let you in ({level}). Send "
                                      "/help to see what I can do.")
    else:
        await sink.emit(Notice(f"Denied {stranger}."))
        await agent.tell_paired(code, "The operator did not let you in.")


async def _usage(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    from bot.money.budgets import everyone_report, own_report

    services = agent.services
    if services.budgets is None:
        await sink.emit(Notice("Model spend is not tracked in this setup."))
        return
    if arg.lower() != "all":
        report = await own_report(services.budgets, message.sender, autonomy)
        spoken = await agent.voice.usage_line(message.sender)
        await sink.emit(Notice(f"{report}\n{spoken}" if spoken else report))
        return
    if not agent.is_approver(message.sender):
        await sink.emit(Notice("Only approvers can see everyone's usage; /usage shows yours."))
        return
    spent = await services.spend.by_sender()
    levels = {sender: await services.senders.level_of(sender) for sender in list(spent)[:30]}
    await sink.emit(Notice(await everyone_report(services.budgets, levels, spent)))


async def _voice(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    await agent.voice.command(message, sink, arg)


def _resolver(choice: str) -> Handler:
    async def handler(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink,
                      arg: str) -> None:
        if not arg:
            await sink.emit(Notice(f"Usage: /{'approve' if choice == 'approve' else 'deny'} ID"))
            return
        resolution = await agent.resolve_approval(arg.split()[0], message.sender, choice)
        agent.resume_approval(resolution, sink)
        if resolution.ok:
            verb = ANSWER_LABELS["approve" if resolution.status == "approved" else "deny"]
            await sink.emit(Notice(f"{verb}: {resolution.request.tool}."))
        else:
            await sink.emit(Notice(resolution.reason))
    return handler


HANDLERS: dict[str, Handler] = {
    "start": _start,
    "help": _help,
    "whoami": _whoami,
    "tools": _tools,
    "new": _new,
    "stop": _stop,
    "undo": _undo,
    "usage": _usage,
    "approve": _resolver("approve"),
    "deny": _resolver("deny"),
    "jobs": _jobs,
    "pair": _pair,
    "grants": _grants,
    "timezone": _timezone,
    "voice": _voice,
}
