"""A tap on an approval button: resolve through the agent, answer the tap, show the outcome.

Telegram shows a spinner on the button until `answerCallbackQuery`, so every tap is answered:
with the outcome when it counted, with the agent's reason when it did not (a stranger, a second
tap, an expired or unknown request). A tap on a request that has ended (a copy whose redraw was
lost, say to a restart) redraws the tapped message with how it ended, so its buttons go. The
request message is edited only when it really carries this request's buttons, so forged
callback data cannot rewrite some other message of the bot. A request of a batch (several calls
of one step) is redrawn by the agent instead, from the store, on every copy: its other calls may
still wait.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from telegram import CallbackQuery, Message
from telegram.error import TelegramError

from bot.core.approval_cards import ANSWER_LABELS
from bot.core.events import AgentAPI
from bot.core.identity import Sender
from bot.language.catalogs import N_
from bot.language.translator import Translator
from channels.telegram.approvals import belongs_to, outcome_message, parse_callback
from channels.telegram.batch import parse_batch_callback
from channels.telegram.sending import DeliveryError, Messenger
from channels.telegram.sink import ChatSink, SinkSettings, Target

log = logging.getLogger(__name__)

INVALID_BUTTON = N_("This button is not valid any more.")
MAX_ANSWER_CHARS = 200   # Telegram's limit for callback query answers


def reader_translator(agent: AgentAPI, chat_id: int, request: Any) -> Translator:
    """Who reads the request message in `chat_id`: the requester in the chat of the request, else
    the approver whose private chat it is (a Telegram private chat has the user's id)."""
    if str(chat_id) == request.chat or chat_id < 0:
        return agent.translator(request.sender)
    return agent.translator(Sender.of("telegram", chat_id))


def chat_target(chat: str, sender: str) -> Target:
    """Where the resumed conversation is posted: the chat of the request."""
    chat_id = int(chat)
    user = Sender.parse(sender).user_id
    return Target(chat_id=chat_id, user_id=int(user) if user.isdigit() else None, reply_to=None,
                  is_group=chat_id < 0)


class TapHandler:
    def __init__(self, messenger: Messenger, agent: AgentAPI, settings: SinkSettings):
        self._messenger = messenger
        self._agent = agent
        self._settings = settings

    async def handle(self, query: CallbackQuery) -> None:
        parsed = parse_callback(query.data)
        every = parse_batch_callback(query.data)
        resolver = Sender.of("telegram", query.from_user.id)
        tr = self._agent.translator(resolver)    # the tapper reads the answer to their tap
        if (parsed is None and every is None) or query.message is None:
            await self._answer(query, tr._(INVALID_BUTTON), alert=False)
            return
        message = query.message
        if every is not None:
            approval_id, choice = every
            resolution = await self._agent.resolve_batch(approval_id, resolver, choice)
        else:
            approval_id, choice = parsed
            resolution = await self._agent.resolve_approval(approval_id, resolver, choice)
        if not resolution.ok or resolution.request is None:
            await self._answer(query, tr.say(resolution.reason), alert=True)
            ended = resolution.request
            if ended is not None and ended.status != "pending" and isinstance(message, Message):
                await self._redraw(message, ended, ended.outcome().choice,
                                   self._who(query, ended, resolver))
            return
        request = resolution.request
        # The conversation continues in the chat of the request, whatever message the tap
        # came from (the chat it was tapped in when the request's chat is not a Telegram one).
        target = (chat_target(request.chat, request.sender) if request.chat.lstrip("-").isdigit()
                  else Target(message.chat.id, None, None, message.chat.id < 0))
        sink = ChatSink(self._messenger, self._agent, target, self._settings)
        if self._agent.resume_approval(resolution, sink):
            sink.start_typing()
        await self._answer(query, tr._(ANSWER_LABELS.get(choice, N_("Done"))), alert=False)
        if isinstance(message, Message):
            await self._redraw(message, request, choice, self._who(query, request, resolver))

    @staticmethod
    def _who(query: CallbackQuery, request: Any, tapper: str) -> str:
        """Who decided, with their name when it is the tapper (a second tap by them then
        redraws nothing: the same words)."""
        who = request.resolved_by or tapper
        if who == tapper and query.from_user.full_name:
            who = f"{query.from_user.full_name} ({tapper})"
        return who

    async def _redraw(self, message: Message, request: Any, choice: str, who: str) -> None:
        """The tapped message shows the outcome without buttons (a batch's messages are redrawn
        by the agent, from the store: its other calls may still wait)."""
        if request.batch is not None or not belongs_to(message.reply_markup, request.id):
            return
        part = outcome_message(request.view(), choice, who, request.resolved_at or time.time(),
                               reader_translator(self._agent, message.chat.id, request))
        try:
            await self._messenger.edit(message.chat.id, message.message_id, part, markup=None)
        except DeliveryError:
            log.warning("telegram: could not mark approval %s as answered", request.id,
                        exc_info=True)

    @staticmethod
    async def _answer(query: CallbackQuery, text: str, *, alert: bool) -> None:
        try:
            await query.answer(text[:MAX_ANSWER_CHARS], show_alert=alert)
        except TelegramError:
            log.warning("telegram: could not answer a button tap", exc_info=True)
