"""The commands every channel shares: /start /help /whoami /tools /new /stop /undo /usage
/language /approve ID /deny ID. Channels only forward the text; the answers are Notices, in the
sender's language (their translator).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from bot.access.senders import PairingError
from bot.approvals.grants import GrantError
from bot.config.settings import Config
from bot.core.approval_cards import ANSWER_LABELS
from bot.core.errors import reason_of
from bot.core.events import Button, IncomingMessage, Notice, Sink
from bot.language.catalogs import N_
from bot.language.phrase import Phrase
from bot.language.translator import Translator
from bot.runtime import personal_commands as personal
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
    def translator(self, reader: str) -> Translator: ...
    def shared_with_others(self, message: IncomingMessage) -> bool: ...
    async def tell_paired(self, code: str, text: str) -> None: ...
    async def resolve_approval(self, *args: Any, **kwargs: Any) -> Any: ...
    async def resume_approval(self, *args: Any, **kwargs: Any) -> Any: ...
    async def _queued(self, message: IncomingMessage, sink: Sink,
                      work: Callable[[], Awaitable[None]]) -> Any: ...


Handler = Callable[[Agent, IncomingMessage, str, Sink, str], Awaitable[None]]

DESCRIPTIONS: list[tuple[str, str]] = [
    ("start", N_("Who you are and how to get started")),
    ("help", N_("What I can do and the commands")),
    ("whoami", N_("Your sender id, autonomy level and tool count")),
    ("tools", N_("The tools you can use")),
    ("new", N_("Start a fresh conversation")),
    ("stop", N_("Cancel what I am doing")),
    ("undo", N_("Revert the last change I made in this conversation")),
    ("grants", N_("What your \"Always\" taps allow, with Revoke buttons")),
    ("jobs", N_("Your reminders and scheduled jobs")),
    ("pair", N_("Approvers: let someone in (/pair allow CODE LEVEL, /pair deny CODE)")),
    ("timezone", N_("Show or set your time zone for schedules")),
    ("voice", N_("Answers by voice too: /voice on, off or auto")),
    ("language", N_("Show or choose my language: /language it, es, en or auto")),
    ("usage", N_("Your model spend today and this month, against your limits")),
]

# Shown by /help but not put in the platforms' command menus: they need an argument.
WITH_ARGUMENT: list[tuple[str, str]] = [
    ("approve ID", N_("Approve a request that waits for you")),
    ("deny ID", N_("Deny a request that waits for you")),
]
# "/word" or "/word@bot" followed by a space or the end: a command. "/etc/hosts is what?" is not.
COMMAND_SHAPE = re.compile(r"/[A-Za-z][A-Za-z0-9_]{0,31}(@[A-Za-z0-9_]+)?(?=\s|$)")
SUMMARY_CHARS = 100
# A sentence ends at . ! or ? followed by a space and a capital letter or a `name` ("e.g. a" and
# "e.g. 'X'" go on).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`])")


def descriptions(tr: Translator | None = None) -> list[tuple[str, str]]:
    """The command menu, in `tr`'s language (English without one)."""
    return [(name, tr._(text) if tr else text) for name, text in DESCRIPTIONS]


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
        tr = agent.translator(message.sender)
        await sink.emit(Notice(tr._("Unknown command /{name}: see /help for the commands.",
                                    name=name)))
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
    tr = agent.translator(message.sender)
    await sink.emit(Notice(tr._(
        "Hi! I'm myclaw, your personal agent. You are {sender} with autonomy '{level}'. Just "
        "write to me; anything risky waits for your approval.\nSend /help to see the commands.",
        sender=message.sender, level=autonomy)))


async def _help(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    tr = agent.translator(message.sender)
    lines = [f"/{name} — {tr._(text)}" for name, text in [*DESCRIPTIONS, *WITH_ARGUMENT]]
    await sink.emit(Notice(tr._("Write what you need in plain words; I use tools when it helps "
                                "and ask before anything risky.") + "\n\n" + "\n".join(lines)))


TOOLS_OFF = N_("Tools are off for this model ({model}): it cannot call them, so I answer in "
               "words only.")


def _tools_off(agent: Agent, tr: Translator) -> str | None:
    """The sentence saying the model in use takes no tools, or None when it does."""
    llm, model = agent.services.llm, agent.prompt.model
    if llm is None or llm.tools_enabled(model):
        return None
    return tr._(TOOLS_OFF, model=model)


async def _whoami(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    tr = agent.translator(message.sender)
    count = len(agent.services.registry.list_for_sender(message.sender, autonomy))
    off = _tools_off(agent, tr)
    tools = f"{count}" if off is None else tr._("{count} (off: {why})", count=count, why=off)
    await sink.emit(Notice(tr._("Sender: {sender}\nAutonomy: {level}\nTools: {tools}",
                                sender=message.sender, level=autonomy, tools=tools)))


async def _tools(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    tr = agent.translator(message.sender)
    off = _tools_off(agent, tr)
    if off is not None:
        await sink.emit(Notice(off))
        return
    lines = _tools_text(agent, message, autonomy)
    await sink.emit(Notice(tr._("Your tools:") + "\n" + "\n".join(lines) if lines
                           else tr._("You have no tools.")))


async def _new(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    # A conversation everyone in a group shares is reset for all of them (with everyone's
    # grants and waiting requests): that is an approver's call, not any member's.
    if agent.shared_with_others(message) and not agent.is_approver(message.sender):
        await sink.emit(Notice(Phrase(
            "Everyone in this chat shares this conversation, so only an approver can start a "
            "fresh one. Your own \"Always\" grants: /grants.")))
        return
    agent.stop(message)
    await agent.new_session(message, autonomy)
    await sink.emit(Notice(Phrase("Started a fresh conversation.")))


async def _stop(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    owner = agent.running_for(message)
    if owner is None:
        await sink.emit(Notice(Phrase("Nothing is running.")))
    elif owner not in ("", message.sender) and not agent.is_approver(message.sender):
        await sink.emit(Notice(Phrase("What I am doing now was asked by someone else: only they "
                                      "or an approver can stop it.")))
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


async def _grants(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink,
                  arg: str) -> None:
    grants, tr = agent.services.approvals.grants, agent.translator(message.sender)
    verb, _, rest = arg.partition(" ")
    if verb == "revoke":
        try:
            grant = await grants.revoke(rest.strip(), message.sender)
        except GrantError as exc:
            await sink.emit(Notice(tr._("Cannot revoke: {why}", why=tr.say(reason_of(exc)))))
            return
        await sink.emit(Notice(tr._("Revoked: {grant}. I will ask again.",
                                    grant=tr.say(grant.description))))
        return
    if verb:
        await sink.emit(Notice(tr._("Usage: /grants or /grants revoke ID")))
        return
    session_id = await agent.session_id(message)
    mine = await grants.active_for(message.sender, session_id)
    if not mine:
        await sink.emit(Notice(tr._("No \"Always\" grants in this conversation: I ask before "
                                    "every call that needs approval.")))
        return
    lines = [tr._("• {grant} — until {when} [{id}]", grant=tr.say(g.description),
                  when=tr.moment(g.expires_at), id=g.id) for g in mine]
    buttons = tuple(Button(tr._("Revoke: {tool} {scope}", tool=g.tool, scope=tr.say(g.scope_label))[:40],
                           f"/grants revoke {g.id}") for g in mine)
    await sink.emit(Notice(tr._("What runs without asking in this conversation (until /new):")
                           + "\n" + "\n".join(lines), buttons=buttons))


async def _pair(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink,
                arg: str) -> None:
    senders, tr = agent.services.senders, agent.translator(message.sender)
    if not agent.is_approver(message.sender):
        await sink.emit(Notice(tr._("Only an approver can let people in.")))
        return
    words = arg.split()
    allow = len(words) in (2, 3) and words[0] == "allow"
    if not (allow or (len(words) == 2 and words[0] == "deny")):
        await sink.emit(Notice(tr._("Usage: /pair allow CODE [read_only|supervised|full] or "
                                    "/pair deny CODE")))
        return
    code, level = words[1], (words[2] if len(words) == 3 else "supervised")
    try:
        if allow:
            stranger = await senders.approve(code, level, by=message.sender)
        else:
            stranger = await senders.deny(code, by=message.sender)
    except PairingError as exc:
        await sink.emit(Notice(tr._("Cannot do that: {why}", why=tr.say(reason_of(exc)))))
        return
    if allow:
        await sink.emit(Notice(tr._("Let {who} in as {level}.", who=stranger, level=level)))
        await agent.tell_paired(code, Phrase("✅ You're in! The operator let you in ({level}). "
                                             "Send /help to see what I can do.", level=level))
    else:
        await sink.emit(Notice(tr._("Denied {who}.", who=stranger)))
        await agent.tell_paired(code, Phrase("The operator did not let you in."))


async def _usage(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    from bot.money.budgets import everyone_report, own_report

    services = agent.services
    if services.budgets is None:
        await sink.emit(Notice(Phrase("Model spend is not tracked in this setup.")))
        return
    if arg.lower() != "all":
        report = await own_report(services.budgets, message.sender, autonomy)
        spoken = await agent.voice.usage_line(message.sender)
        await sink.emit(Notice(Phrase("{report}\n{voice}", report=report, voice=spoken)
                               if spoken else report))
        return
    if not agent.is_approver(message.sender):
        await sink.emit(Notice(Phrase("Only approvers can see everyone's usage; /usage shows "
                                      "yours.")))
        return
    spent = await services.spend.by_sender()
    levels = {sender: await services.senders.level_of(sender) for sender in list(spent)[:30]}
    await sink.emit(Notice(await everyone_report(services.budgets, levels, spent)))


async def _voice(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    await agent.voice.command(message, sink, arg)


def _resolver(choice: str) -> Handler:
    async def handler(agent: Agent, message: IncomingMessage, autonomy: str, sink: Sink,
                      arg: str) -> None:
        tr = agent.translator(message.sender)
        if not arg:
            await sink.emit(Notice(tr._("Usage: /{command} ID",
                                        command="approve" if choice == "approve" else "deny")))
            return
        resolution = await agent.resolve_approval(arg.split()[0], message.sender, choice)
        agent.resume_approval(resolution, sink)
        if resolution.ok:
            verb = ANSWER_LABELS["approve" if resolution.status == "approved" else "deny"]
            await sink.emit(Notice(f"{tr._(verb)}: {resolution.request.tool}."))
        else:
            await sink.emit(Notice(tr.say(resolution.reason)))
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
    "jobs": personal.jobs,
    "pair": _pair,
    "grants": _grants,
    "timezone": personal.timezone,
    "language": personal.language,
    "voice": _voice,
}
