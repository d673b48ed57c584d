"""Photos, documents and voice notes in: checked by content, stored once, shown to the model.

Channels download attachments with their own libraries and hand the core typed parts
(`bot.core.events.ImagePart`, `DocumentPart`, `AudioPart`); nothing here knows a platform or a URL.

- limits.py       the `[media]` settings as one value, and `MediaRefused` (a clear user message)
- images.py       type by magic bytes, pixel limit before decoding, scaled down with Pillow
- documents.py    PDF (page count) or UTF-8 text; anything else refused with what is supported
- attachments.py  stored once by content hash; history holds a small reference block that the
                  prompt expands (or, after a few turns, replaces with a placeholder line)
- inbox.py        the upload saved under <workspace>/inbox/ with a safe name and a quota
- transcribe.py   voice notes through an OpenAI-compatible /v1/audio/transcriptions service
- intake.py       one incoming message's parts → the content blocks of its user turn
"""
