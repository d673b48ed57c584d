"""The commands about the person themselves: their jobs (/jobs), their time zone (/timezone)
and their language (/language). Answers are in the sender's language; times in their zone.
Part of the shared commands (bot.runtime.commands), which route to these.
"""

from __future__ import annotations

from typing import Any

from bot.core.errors import reason_of
from bot.core.events import Button, IncomingMessage, Notice, Sink
from bot.jobs.jobs import JobError
from bot.jobs.schedule import ScheduleError, zone
from bot.language.catalogs import N_
from bot.language.names import NATIVE_NAMES, SUPPORTED
from bot.language.translator import Translator

# `agent` below is bot.runtime.commands.Agent (not imported: that module routes to this one).


async def jobs(agent: Any, message: IncomingMessage, autonomy: str, sink: Sink, arg: str) -> None:
    scheduled, tr = agent.services.jobs, agent.translator(message.sender)
    verb, _, rest = arg.partition(" ")
    if verb in ("cancel", "resume"):
        change = scheduled.cancel if verb == "cancel" else scheduled.resume
        try:
            job = await change(rest.strip(), message.sender)
        except JobError as exc:
            why = tr.say(reason_of(exc))
            text = (tr._("Cannot cancel that job: {why}", why=why) if verb == "cancel"
                    else tr._("Cannot resume that job: {why}", why=why))
            await sink.emit(Notice(text))
            return
        await sink.emit(Notice(tr._("Job '{name}' cancelled.", name=job.name) if verb == "cancel"
                               else tr._("Job '{name}' resumed.", name=job.name)))
        return
    if verb:
        await sink.emit(Notice(tr._("Usage: /jobs, /jobs cancel ID or /jobs resume ID")))
        return
    listing = await scheduled.for_owner(message.sender)
    if not listing:
        await sink.emit(Notice(tr._(
            "You have no scheduled jobs. Ask me, e.g. \"remind me in 20 minutes to stretch\" or "
            "\"every Monday at 8 summarise my notes\".")))
        return
    await sink.emit(_jobs_listing(tr, listing))


def _jobs_listing(tr: Translator, listing: list[Any]) -> Notice:
    lines, buttons = [], []
    for job in listing:
        schedule = job.schedule
        when = (tr._("next {when}", when=tr.moment(job.next_run, schedule.timezone))
                if job.status == "active" and job.next_run else tr._(job.status))
        last = (tr._("; last: {outcome}", outcome=tr.say(job.outcome_words))
                if job.last_outcome else "")
        described = (tr._("once, {when}", when=tr.moment(float(schedule.spec), schedule.timezone))
                     if schedule.kind == "once" else tr.say(schedule.describe()))
        lines.append(f"• {job.name} [{job.id}] — {described}; {when}{last}")
        buttons.append(Button(tr._("Cancel: {name}", name=job.name[:24]), f"/jobs cancel {job.id}"))
        if job.status == "paused":
            buttons.append(Button(tr._("Resume: {name}", name=job.name[:24]),
                                  f"/jobs resume {job.id}"))
    return Notice(tr._("Your jobs:") + "\n" + "\n".join(lines), buttons=tuple(buttons))


# The states a job is listed in (bot/jobs/jobs.py), for the catalog.
JOB_STATES = (N_("active"), N_("paused"), N_("cancelled"), N_("done"), N_("failed"))


async def timezone(agent: Any, message: IncomingMessage, autonomy: str, sink: Sink,
                    arg: str) -> None:
    preferences, default = agent.services.preferences, agent.config["agent"]["timezone"]
    tr = agent.translator(message.sender)
    if not arg:
        current = await preferences.timezone_of(message.sender, default)
        await sink.emit(Notice(tr._("Your time zone is {zone}. Change it with /timezone "
                                    "Europe/Rome (any IANA name).", zone=current)))
        return
    try:
        zone(arg.split()[0])
    except ScheduleError as exc:
        await sink.emit(Notice(tr.say(reason_of(exc))))
        return
    await preferences.set_timezone(message.sender, arg.split()[0])
    agent.services.languages.zone_changed(message.sender, arg.split()[0])
    tr = agent.translator(message.sender)
    await sink.emit(Notice(tr._("Time zone set to {zone}. New schedules use it.",
                                zone=arg.split()[0])))


async def language(agent: Any, message: IncomingMessage, autonomy: str, sink: Sink,
                    arg: str) -> None:
    """/language: what the sender hears; /language it|es|en picks one, /language auto goes back
    to what their app says (else the installation's default)."""
    languages = agent.services.languages
    choice = arg.split()[0].lower() if arg.split() else ""
    if choice and choice not in (*SUPPORTED, "auto"):
        tr = agent.translator(message.sender)
        await sink.emit(Notice(tr._("I speak {languages}. Usage: /language it, /language es, "
                                    "/language en or /language auto.",
                                    languages=", ".join(NATIVE_NAMES.values()))))
        return
    if choice:
        await languages.choose(message.sender, choice)
    tr = agent.translator(message.sender)
    name = NATIVE_NAMES[tr.language]
    if languages.chosen(message.sender):
        text = tr._("I speak {language} with you. /language auto follows your app's language "
                    "again.", language=name)
    else:
        text = tr._("I speak {language} with you, as your app or the installation says. Choose "
                    "with /language it, /language es or /language en.", language=name)
    await sink.emit(Notice(text))
