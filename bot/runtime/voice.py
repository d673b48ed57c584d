"""Voice replies: the answer spoken as well as written, when the person wants it.

`/voice on|off|auto` is each sender's choice, stored in `sender_settings.voice` (auto, the
default: answer by voice when the person spoke by voice). The agent wraps a turn's sink
(`wrapped`): the final answer goes out as text first, untouched; then, in a task of its own, the
spoken part of it (bot.media.speech.spoken) is synthesised by the configured engine, encoded in
the worker pool and emitted as a `SpeechOut`. Nothing here delays the text or the next message.

Money: an engine with a priced model goes through the one gate for paid calls
(bot.money.gate): admitted before it speaks, its characters recorded in `usage` after
(espeak-ng is free and skips both). Over budget, the text is the
answer and the person is told once a day that voice is paused; an engine that fails is said
once a day too. Either way the text has already been sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bot.core.events import AudioPart, Done, Event, IncomingMessage, Notice, Sink, SpeechOut
from bot.core.ports import Payer
from bot.language.catalogs import N_
from bot.language.phrase import Number, Phrase
from bot.money.budgets import BudgetExceeded
from bot.store.notices import OnceNotices

if TYPE_CHECKING:
    from bot.media.speech.engine import Speaker
    from bot.runtime.services import Services

log = logging.getLogger(__name__)

MODES = ("on", "off", "auto")
DEFAULT_MODE = "auto"
TOPIC = "voice"
MAX_SPEAKING = 2          # syntheses at once: each is a process and a worker-pool job
EXPLAIN = {
    "on": N_("every answer is also sent as a voice message"),
    "off": N_("answers are text only"),
    "auto": N_("answers come by voice too when you send a voice note"),
}


def spoke_by_voice(message: IncomingMessage) -> bool:
    """The person's own voice note is in the message (a forwarded recording is not them)."""
    return any(isinstance(p, AudioPart) and p.spoken_by_sender for p in message.parts)


class VoiceReplies:
    def __init__(self, services: Services, session_of: Callable[[IncomingMessage], Any]):
        self.services = services
        self.section = services.config["media"]["speech"]
        self._session_of = session_of           # the agent's session id of a message
        self._speaker: Speaker | None = None    # built on first use
        self._modes: dict[str, str] = {}        # cache of the stored choices
        self._tasks: set[asyncio.Task[None]] = set()
        self._speaking = asyncio.Semaphore(MAX_SPEAKING)
        self._once = OnceNotices(services.store, services.spend.clock)
        services.store.subscribe(TOPIC, self._changed_elsewhere)

    # --- each sender's choice -------------------------------------------------------------

    async def mode_of(self, sender: str) -> str:
        mode = self._modes.get(sender)
        if mode is None:
            stored = await self.services.preferences.voice_of(sender)
            mode = stored if stored in MODES else DEFAULT_MODE
            self._modes[sender] = mode
        return mode

    async def set_mode(self, sender: str, mode: str) -> None:
        await self.services.preferences.set_voice(sender, mode, changed_topic=TOPIC)
        self._modes[sender] = mode

    def _changed_elsewhere(self, sender: str | None) -> None:
        if sender is None:
            self._modes.clear()
        else:
            self._modes.pop(sender, None)

    def language_of(self, sender: str, answer: str, heard: str = "") -> str:
        """The language the answer is spoken in, decided here only: the one the person chose
        (/language); else the one the answer is clearly written in (the voice reads that text:
        an English voice must not read Italian); else the one the answer and the person's own
        message (`heard`) clearly share; else the resolver's (bot/access/languages.py: the
        platform's hint, the configured default). WhatsApp and Discord DMs give no hint, so
        for them the words decide."""
        from bot.media.speech.spoken import language_scores, leading_language

        languages = self.services.languages
        chosen = languages.chosen(sender)
        if chosen:
            return chosen
        written = language_scores(answer)
        both = {lang: score + language_scores(heard).get(lang, 0)
                for lang, score in written.items()}
        return leading_language(written) or leading_language(both) or \
            languages.language_of(sender)

    # --- a turn's answer, spoken ----------------------------------------------------------

    def wrapped(self, message: IncomingMessage, level: Any, sink: Sink) -> Sink:
        return _SpeakingSink(self, message, str(level), sink)

    async def answered(self, message: IncomingMessage, level: str, text: str, sink: Sink) -> None:
        """Called once the answer's text is out: speak it if the person wants it."""
        mode = await self.mode_of(message.sender)
        if mode == "off" or (mode == "auto" and not spoke_by_voice(message)):
            return
        task = asyncio.create_task(self._speak(message, level, text, sink))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if message.channel == "cli":
            # The terminal is one conversation on one screen: the prompt comes back once the
            # voice file's path is shown (the text is already there).
            await asyncio.wait({task})

    async def settled(self) -> None:
        """Wait for every voice reply in flight (shutdown, tests, benches)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def stop(self, grace: float) -> None:
        """Let voice replies in flight finish within `grace` seconds, then cancel the rest."""
        if self._tasks:
            _, late = await asyncio.wait(list(self._tasks), timeout=grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)

    async def _speak(self, message: IncomingMessage, level: str, text: str, sink: Sink) -> None:
        # The speech code (engines, what of an answer is spoken) with the first spoken answer.
        from bot.media.speech.engine import SpeechError
        from bot.media.speech.spoken import spoken_text

        sender = message.sender
        language = self.language_of(sender, text, message.text)
        said = spoken_text(text, language, int(self.section["max_chars"]))
        if not said:
            return
        speaker = self.speaker()
        model = speaker.engine.priced_model
        try:
            if model:
                payer = Payer(sender, level, await self._session_of(message))
                async with self.services.paid.call(payer, "speech") as bill:
                    async with self._speaking:
                        voice = await speaker.speak(said, language)
                    bill.charge(model, usage={"characters": len(said)})
            else:
                async with self._speaking:
                    voice = await speaker.speak(said, language)
            await sink.emit(SpeechOut(voice.data, voice.duration))
        except BudgetExceeded:
            await self._once_notice(sink, "voice-paused", sender, Phrase(
                "🔇 Voice replies are paused: the spend limit is reached. The text above "
                "is the whole answer."))
        except SpeechError as exc:
            log.warning("voice reply for %s not spoken: %s", sender, exc.message)
            await self._once_notice(sink, "voice-down", sender, Phrase(
                "🔇 I could not say this answer aloud ({why}); the text above is the whole "
                "answer. I will try again with the next one.", why=exc.message))
        except Exception:   # a task of its own: nobody else would see it fail
            log.exception("voice reply for %s failed", sender)

    async def _once_notice(self, sink: Sink, kind: str, sender: str, text: str) -> None:
        day = self.services.spend.period().day
        if await self._once.first(f"{kind}\x1f{sender}\x1f{day}"):
            await sink.emit(Notice(text))

    def speaker(self) -> Speaker:
        if self._speaker is None:
            from bot.media.speech.engine import Speaker, build_engine

            self._speaker = Speaker(build_engine(self.services.config))
        return self._speaker

    # --- /voice and /usage ----------------------------------------------------------------

    async def command(self, message: IncomingMessage, sink: Sink, arg: str) -> None:
        from bot.media.speech.engine import engine_name

        choice = arg.strip().lower()
        if not choice:
            mode = await self.mode_of(message.sender)
            await sink.emit(Notice(Phrase(
                "Voice replies: {mode} ({explained}); spoken by {engine}. Change it with "
                "/voice on, /voice off or /voice auto.", mode=mode,
                explained=Phrase(EXPLAIN[mode]), engine=engine_name(self.section))))
            return
        if choice not in MODES:
            await sink.emit(Notice(Phrase("Usage: /voice on | off | auto")))
            return
        await self.set_mode(message.sender, choice)
        if choice != "off" and not self.speaker().engine.available:
            await sink.emit(Notice(Phrase(
                "Voice replies: {mode} — {explained} (but no speech engine is available here: "
                "the operator can install espeak-ng).", mode=choice,
                explained=Phrase(EXPLAIN[choice]))))
            return
        await sink.emit(Notice(Phrase("Voice replies: {mode} — {explained}.", mode=choice,
                                      explained=Phrase(EXPLAIN[choice]))))

    async def usage_line(self, sender: str) -> str:
        """What speaking cost this sender today ('' when nothing priced was spoken)."""
        characters, cost = await self.services.spend.spoken_today(sender)
        if not characters:
            return ""
        return Phrase("• voice today: {characters} characters spoken, {cost} (in the totals above)",
                      characters=Number(characters), cost=self.services.budgets.amount(cost))


class _SpeakingSink:
    """A turn's sink that hands the final answer to the voice once the text is out."""

    def __init__(self, voice: VoiceReplies, message: IncomingMessage, level: str, sink: Sink):
        self._voice = voice
        self._message = message
        self._level = level
        self.inner = sink

    async def emit(self, event: Event) -> None:
        await self.inner.emit(event)
        if isinstance(event, Done) and event.text.strip() and not event.waiting_for_approval:
            await self._voice.answered(self._message, self._level, event.text, self.inner)

    def __getattr__(self, name: str) -> Any:   # the channel's own sink methods (close, …)
        return getattr(self.inner, name)
