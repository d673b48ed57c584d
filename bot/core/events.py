"""The plain dataclasses that channels and the core exchange.

A channel turns a platform event into an `IncomingMessage` and hands it to the agent together
with a `Sink`; the agent emits `Event`s into the sink, and the channel renders them (a streamed
message edited in place, approval buttons, a status line). The core never calls a platform API,
and channels know nothing of the agent's internals.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Protocol

from bot.core.approval_cards import N_, ApprovalBatchNeeded, ApprovalNeeded, ApprovalView

if TYPE_CHECKING:
    from bot.core.ports import HeldPort, InboxPort, SentPort

ChannelName = Literal["cli", "telegram", "discord", "slack", "whatsapp"]


# --- valid text: what every boundary where text enters turns anything into -------------------

REPLACEMENT = "\ufffd"
# A catalog message id: the agent says it as a Phrase, in the sender's language.
REPAIRED_NOTICE = N_("Some characters of your message could not be read (invalid bytes) and "
                     "were replaced with \ufffd.")


def repair_text(value: str | bytes) -> tuple[str, bool]:
    """`value` as valid text and whether anything had to be replaced: invalid UTF-8 bytes, lone
    surrogates (what Python makes of undecodable input) and NUL become U+FFFD, so that nothing
    that reaches the store, a log or a platform can fail to encode (PostgreSQL refuses NUL in
    text). Surrogate pairs are joined; valid text is returned as it is, at the cost of one check.
    """
    if isinstance(value, bytes | bytearray):
        text = bytes(value).decode("utf-8", "replace")
        return _without_nul(text, text.count(REPLACEMENT) != bytes(value).count(
            REPLACEMENT.encode()))
    if value.isascii() and "\x00" not in value:
        return value, False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        joined = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return _without_nul(joined, True)
    return _without_nul(value, False)


def _without_nul(text: str, changed: bool) -> tuple[str, bool]:
    if "\x00" in text:
        return text.replace("\x00", REPLACEMENT), True
    return text, changed


def valid_text(value: str | bytes) -> str:
    """`value` as valid text (see `repair_text`)."""
    return repair_text(value)[0]


def valid_data(value: Any) -> Any:
    """A JSON-like value (a tool's result, an MCP server's answer) with every string in it,
    keys included, made valid text; anything else is left as it is."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_data(k): valid_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [valid_data(v) for v in value]
    return value


def _repair_fields(item: Any, *names: str) -> bool:
    """Make the named str fields of a frozen dataclass valid text while it is constructed;
    True when any had to be repaired."""
    repaired = False
    for name in names:
        text, changed = repair_text(getattr(item, name))
        if changed:
            object.__setattr__(item, name, text)
            repaired = True
    return repaired


# --- provenance: where a block the model sees came from --------------------------------------


class Origin(StrEnum):
    """Where a content block came from. Only what the requester typed in this message (or said
    in a voice note they recorded) is theirs; everything else is data that may be steering the
    model, and taints the turn whatever its type (text, photo, document, voice, caption): every
    call that can carry data out is then at least medium risk (bot.core.policy).

    How each is recorded in the stored history, so a turn resumed later is judged the same:
    the requester's words are plain text; other people's words (a member, a forward, a quote, a
    recording's transcript) are wrapped as untrusted data naming the origin (bot.core.wrap);
    a photo or document is a reference block with `untrusted: true` and its `origin`
    (bot.media.attachments); a tool's result is wrapped when the tool says it may carry outside
    content (`returns_untrusted`)."""

    REQUESTER = "requester"      # typed (or recorded as a voice note) by the requester, now
    MEMBER = "member"            # another person of a shared conversation
    FORWARD = "forward"          # forwarded: someone else's message (or the requester's old one)
    QUOTE = "quote"              # the message a reply quotes
    ATTACHMENT = "attachment"    # a photo or file: its pixels and words are anyone's
    RECORDING = "recording"      # the transcript of a recording someone else made
    DOCUMENT = "document"        # the text of a document
    TOOL = "tool"                # a tool's result

    @property
    def taints(self) -> bool:
        return self is not Origin.REQUESTER


# --- attachments a channel hands over (downloaded bytes: never a platform URL) --------------
# The channel's declared type and name are hints only; the core checks the content itself
# (bot/media). `data` stays out of repr() so a logged message never dumps megabytes.


@dataclass(frozen=True)
class ImagePart:
    data: bytes = field(repr=False)
    media_type: str = ""
    name: str = ""
    width: int = 0      # as the platform reported them (0 = unknown)
    height: int = 0

    def __post_init__(self) -> None:
        _repair_fields(self, "name", "media_type")


@dataclass(frozen=True)
class DocumentPart:
    data: bytes = field(repr=False)
    name: str = ""
    media_type: str = ""

    def __post_init__(self) -> None:
        _repair_fields(self, "name", "media_type")


@dataclass(frozen=True)
class AudioPart:
    """A voice note or audio file. `spoken_by_sender` is False for a forwarded one: its
    transcript is someone else's words and enters the prompt as untrusted data."""

    data: bytes = field(repr=False)
    name: str = "voice.ogg"
    media_type: str = "audio/ogg"
    spoken_by_sender: bool = True

    def __post_init__(self) -> None:
        _repair_fields(self, "name", "media_type")


@dataclass(frozen=True)
class UnavailablePart:
    """An attachment the channel could not fetch (too large to download, network failure)."""

    name: str
    reason: str

    def __post_init__(self) -> None:
        _repair_fields(self, "name", "reason")


Part = ImagePart | DocumentPart | AudioPart | UnavailablePart


def part_origin(part: Part, forwarded: bool = False) -> Origin:
    """Where an attachment's content came from (`forwarded`: the message carrying it was)."""
    if forwarded:
        return Origin.FORWARD
    if isinstance(part, AudioPart):
        return Origin.REQUESTER if part.spoken_by_sender else Origin.RECORDING
    return Origin.DOCUMENT if isinstance(part, DocumentPart) else Origin.ATTACHMENT
# Fetches a message's attachments through the channel's library. The agent calls it only for a
# sender it admits (paired, not ignored, within the rate limit): a stranger's file is never
# downloaded, let alone opened or transcribed.
Download = Callable[[], Awaitable[tuple[Part, ...]]]


# The longest message the agent takes (refused whole, never cut); channels that can tell the
# person before sending (the terminal) use the same figure.
MAX_MESSAGE_CHARS = 20_000


@dataclass(frozen=True)
class IncomingMessage:
    sender: str                        # "telegram:123" — always the user, never the chat
    chat: str                          # platform chat/channel id as text ("local" on the CLI)
    text: str
    channel: str = "cli"
    message_id: str | None = None
    roles: tuple[str, ...] = ()        # Discord guild role names of the sender
    is_group: bool = False
    display_name: str = ""
    parts: tuple[Part, ...] = ()       # photos, documents, voice notes sent with the text
    download: Download | None = field(default=None, repr=False, compare=False)  # more, not yet fetched
    inbox_id: int | None = None        # the stored update this message came from (bot/conversation/inbox.py)
    # Set when the message was forwarded: who wrote it (as the platform names them; the
    # sender's own id for an old message of theirs). Its text and every attachment are someone
    # else's, shown to the model as data from them, never as the sender's request.
    forwarded_from: str = ""
    # The text of the message this one replies to or quotes, when the channel passes it on
    # (`quoted_from` names its author): data for context, never the sender's request.
    quoted: str = ""
    quoted_from: str = ""
    # The language the person's app or platform says they use ("it", "es-419", "en_US.UTF-8"):
    # a hint, used when they chose none with /language (bot/access/languages.py).
    language_hint: str = ""
    # Set at construction: the text held bytes that are not text, replaced with U+FFFD (the
    # agent tells the sender so). Every channel's text and captions pass here.
    repaired: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if _repair_fields(self, "text", "display_name", "forwarded_from", "quoted", "quoted_from",
                          "sender", "chat"):
            object.__setattr__(self, "repaired", True)

    @property
    def has_attachments(self) -> bool:
        return bool(self.parts) or self.download is not None


# --- events emitted by the agent ------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolStarted:
    call_id: str
    tool: str
    args: dict[str, Any]


@dataclass(frozen=True)
class ToolProgress:
    call_id: str
    tool: str
    text: str


@dataclass(frozen=True)
class ToolFinished:
    call_id: str
    tool: str
    ok: bool
    summary: str = ""


@dataclass(frozen=True)
class Button:
    """A button under a notice. Tapping it sends `command` (e.g. "/jobs cancel 3f2a") as a
    message from whoever tapped, so it passes every check that typing the command would."""

    label: str
    command: str


@dataclass(frozen=True)
class Notice:
    """A complete message for the user (command replies, pairing codes, step-limit notes).

    `private=True` asks the channel to deliver it to the sender only (e.g. Discord DM).
    """

    text: str
    private: bool = False
    buttons: tuple[Button, ...] = ()


@dataclass(frozen=True)
class Done:
    """The turn ended. `text` is the model's whole final answer ('' when there is none)."""

    text: str
    usage: dict[str, int] = field(default_factory=dict)
    waiting_for_approval: bool = False


@dataclass(frozen=True)
class ErrorEvent:
    """The turn failed; `message` is one clear, user-facing line. Nothing was lost."""

    message: str


@dataclass(frozen=True)
class FileOut:
    """A workspace file the agent sends to the chat (the channel uploads it with its library).
    `path` is workspace-relative, for channels that show where the file is instead."""

    name: str
    data: bytes = field(repr=False)
    path: str = ""
    caption: str = ""
    media_type: str = "application/octet-stream"


@dataclass(frozen=True)
class SpeechOut:
    """The answer spoken: OGG/Opus audio sent after the text (never instead of it), as the
    platform's voice message where it has one (`bot.media.speech`)."""

    data: bytes = field(repr=False)
    duration: float
    name: str = "voice-reply.ogg"
    media_type: str = "audio/ogg"


Event = (TextDelta | ToolStarted | ToolProgress | ToolFinished | ApprovalNeeded
         | ApprovalBatchNeeded | Notice | Done | ErrorEvent | FileOut | SpeechOut)


class Sink(Protocol):
    """Where the agent sends a turn's events. Implemented by each channel."""

    async def emit(self, event: Event) -> None: ...


class CollectingSink:
    """A sink that keeps every event; handy for the CLI's non-interactive mode and tests."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def emit(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def text(self) -> str:
        done = self.of(Done)
        return done[-1].text if done else ""


class AgentAPI(Protocol):
    """What a channel may ask of the agent. Implemented by `bot.runtime.agent.Agent`.

    `handle` covers everything a user can send: plain text, the shared commands (/start /help
    /whoami /tools /new /stop /undo /approve ID /deny ID), pairing of unknown senders and silence
    for ignored ones. Messages of one session are handled in order; different sessions run
    concurrently. An approval answer goes one way: `resolve_approval` decides it (and who may
    answer); the channel, knowing the resolution, builds the sink where the conversation
    continues and hands it to `resume_approval`.

    A message stored in the inbox (`inbox_id` set) that the agent does not start because it is
    shutting down raises `bot.core.errors.ShuttingDown`: the channel leaves its row for the restart.
    """

    async def handle(self, message: IncomingMessage, sink: Sink) -> None: ...

    async def resolve_approval(self, approval_id: str, resolver: str,
                               choice: str) -> Any: ...   # -> bot.approvals.service.Resolution

    async def resolve_batch(self, batch: str, resolver: str,
                            choice: str) -> Any: ...      # "Approve all" / "Deny all"

    def resume_approval(self, resolution: Any, sink: Sink) -> bool: ...

    async def set_approval_message_ref(self, approval_id: str, ref: str,
                                       channel: str = "") -> None: ...

    async def pending_approvals(self, channel: str) -> list[ApprovalView]: ...

    # The command menu in `language` ("" = the installation's default language).
    def command_descriptions(self, language: str = "") -> list[tuple[str, str]]: ...

    # -> bot.language.translator.Translator: how `reader` hears the bot (their language; `hint`
    # is what their platform says about this very interaction)
    def translator(self, reader: str, hint: str = "") -> Any: ...

    @property
    def inbox(self) -> InboxPort:
        """Where updates are stored before they are acknowledged."""
        ...

    @property
    def held(self) -> HeldPort:
        """Messages a platform would not deliver yet, kept until the person can be reached."""
        ...

    @property
    def sent(self) -> SentPort:
        """Messages a platform took, by its message id, for its later status callbacks."""
        ...
