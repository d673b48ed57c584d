"""Socket Mode: Slack pushes envelopes over a WebSocket the bot opens (no public URL needed).

The URL comes from `apps.connections.open` (the app-level token, `xapp-…`) at `[slack]
base_url`; slack-sdk's aiohttp client keeps the connection (pings, reconnects when Slack asks).
Each envelope is stored through `receive` and only then acknowledged (`{"envelope_id": …}`):
one that could not be stored is not acknowledged, so Slack sends it again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from bot.core.errors import ChannelError

log = logging.getLogger(__name__)

KINDS = ("events_api", "interactive", "slash_commands")
PING_INTERVAL = 10.0
Receive = Callable[[str, dict[str, Any]], Awaitable[bool]]


class SocketReceiver:
    def __init__(self, app_token: str, client: AsyncWebClient, receive: Receive):
        self._app_token = app_token
        self._client = client
        self._receive = receive
        self._socket: SocketModeClient | None = None

    async def start(self) -> None:
        socket = SocketModeClient(app_token=self._app_token, web_client=self._client,
                                  ping_interval=PING_INTERVAL,
                                  logger=logging.getLogger("slack_sdk.socket_mode"))
        socket.socket_mode_request_listeners.append(self._on_request)
        self._socket = socket
        try:
            await socket.connect()
        except SlackApiError as exc:
            await self.stop()
            raise ChannelError(f"Slack refused a Socket Mode connection "
                               f"({exc.response.get('error')}): check SLACK_APP_TOKEN "
                               "(an app-level token with connections:write)") from exc
        except (SlackClientError, OSError) as exc:
            await self.stop()
            raise ChannelError(f"cannot open the Slack Socket Mode connection: "
                               f"{type(exc).__name__}") from exc

    async def connected(self) -> bool:
        return self._socket is not None and await self._socket.is_connected()

    async def stop(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            await socket.close()

    async def _on_request(self, socket: SocketModeClient, request: SocketModeRequest) -> None:
        if request.type in KINDS:
            try:
                await self._receive(request.type, request.payload)
            except Exception:
                log.exception("slack: could not store envelope %s; Slack will send it again",
                              request.envelope_id)
                return
        await socket.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))
