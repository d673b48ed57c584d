"""Speech out: the answer spoken, for the channels to send as a voice message.

- seam.py     the seam: `SpeechEngine` (text in a language → audio bytes), `SpeechError`, `Voice`
- engine.py   the engine the config chooses, and `Speaker` (engine + encoding in the worker pool)
- espeak.py   espeak-ng, local and offline (a subprocess), a voice per language: the default
- http.py     any service speaking the OpenAI `POST /v1/audio/speech` API
- spoken.py   what is said: the answer without code, tables and URLs, cut at `max_chars`
- encode.py   any audio → OGG/Opus (what Telegram shows as a voice message), with libsndfile
"""
