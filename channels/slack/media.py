"""Files of a Slack message, downloaded from `url_private` with the bot token.

The token goes only to Slack's own file host (`files.slack.com`) or the host of `[slack]
base_url` (a test fake, a proxy): a file object naming any other URL is refused, since the token
in the Authorization header would go with the request. The declared size is checked against
`[media]` before downloading, the bytes after (a body larger than declared is cut off at the
limit, never read whole). The type is read from the content: an image by its magic bytes
(bot.media.images), audio by Slack's own audio-clip marker or the declared type, anything else
a document that the core checks further. Why a file could not be used is a Phrase: the core
tells the sender in their language. A voice clip recorded in Slack (`subtype
slack_audio`) is the sender's own words; an uploaded audio file is anyone's.

Nothing here runs for a stranger: the channel hands the agent a `download` that the agent calls
only once it admits the sender. Neither the URL nor the token is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from bot.core.events import AudioPart, DocumentPart, Part, UnavailablePart
from bot.language.phrase import Phrase, size_phrase
from channels.slack import texts

log = logging.getLogger(__name__)

SLACK_FILE_HOST = "files.slack.com"
DOWNLOAD_TIMEOUT = 60.0
CHUNK = 1 << 16


def is_audio(file: dict[str, Any]) -> bool:
    kind = str(file.get("mimetype") or "").lower()
    return file.get("subtype") == "slack_audio" or kind.startswith(("audio/", "video/webm"))


def voice_clip(file: dict[str, Any]) -> bool:
    return file.get("subtype") == "slack_audio"


class Files:
    def __init__(self, token: str, base_url: str, media: dict[str, Any]):
        self._token = token
        self._hosts = {SLACK_FILE_HOST, urlsplit(base_url).netloc}
        self._media = media

    async def parts(self, files: Sequence[dict[str, Any]]) -> tuple[Part, ...]:
        timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            return tuple([await self._part(session, file) for file in files])

    def _limit(self, file: dict[str, Any]) -> int:
        kind = str(file.get("mimetype") or "").lower()
        if kind.startswith("image/"):
            return int(self._media["max_image_bytes"])
        if is_audio(file):
            return int(self._media["max_audio_bytes"])
        return int(self._media["max_document_bytes"])

    async def _part(self, session: aiohttp.ClientSession, file: dict[str, Any]) -> Part:
        name = str(file.get("name") or file.get("title") or "file")
        url = str(file.get("url_private_download") or file.get("url_private") or "")
        if file.get("mode") in ("hidden_by_limit", "tombstone", "external") or not url:
            return UnavailablePart(name, Phrase(texts.FILE_HIDDEN))
        split = urlsplit(url)
        if split.scheme not in ("https", "http") or split.netloc not in self._hosts:
            return UnavailablePart(name, Phrase(texts.FILE_NOT_FROM_SLACK))
        limit, size = self._limit(file), int(file.get("size") or 0)
        if size > limit:
            return UnavailablePart(name, Phrase(texts.FILE_TOO_LARGE, size=size_phrase(size),
                                                limit=size_phrase(limit)))
        data = await self._download(session, url, limit)
        if data is None:
            return UnavailablePart(name, Phrase(texts.FILE_DOWNLOAD_FAILED))
        if len(data) > limit:
            over = Phrase(texts.FILE_OVER, size=size_phrase(limit))
            return UnavailablePart(name, Phrase(texts.FILE_TOO_LARGE, size=over,
                                                limit=size_phrase(limit)))
        return _typed(data, name, file)

    async def _download(self, session: aiohttp.ClientSession, url: str, limit: int) -> bytes | None:
        headers = {"Authorization": f"Bearer {self._token}"}
        try:
            async with session.get(url, headers=headers, allow_redirects=False) as response:
                if response.status != 200:
                    log.warning("slack: a file download answered %s", response.status)
                    return None
                body = bytearray()
                async for chunk in response.content.iter_chunked(CHUNK):
                    body.extend(chunk)
                    if len(body) > limit:
                        break    # over the limit: stop reading, the caller refuses it
                return bytes(body)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("slack: downloading a file failed (%s)", type(exc).__name__)
            return None


def _typed(data: bytes, name: str, file: dict[str, Any]) -> Part:
    """A file as a part. Whether it is a photo is read from its bytes by the media intake
    (a picture Slack calls a file is a photo, a file it calls a picture is not), so a file
    that is not audio goes in as a document: what it declares decides nothing."""
    declared = str(file.get("mimetype") or "").lower()
    if is_audio(file) and not declared.startswith("image/"):
        return AudioPart(data, name, declared or "audio/mp4", spoken_by_sender=voice_clip(file))
    return DocumentPart(data, name, "application/octet-stream" if declared.startswith("image/")
                        else declared)
