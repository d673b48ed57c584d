"""The values of secret files and of the bot's own secrets are scrubbed from tool results."""

from __future__ import annotations

import pytest

from bot.core.secrets import redaction as secret_redaction
from bot.core.secrets.redaction import REDACTED, SecretRedaction, values_in
from bot.core.tool import ToolError
from bot.language.phrase import Phrase

TOKEN = "sk-live-Q7x9Zr2Lm4Pw8Kd1"


@pytest.mark.parametrize(("text", "expected"), [
    (f"API_KEY={TOKEN}", {TOKEN}),
    (f"export API_KEY='{TOKEN}'", {TOKEN}),
    ('DB_PASSWORD="hunter22"', {"hunter22"}),
    ("DATABASE_URL=postgres://app:pa55word@db/app", {"postgres://app:pa55word@db/app", "pa55word"}),
    ('{"client_secret": "abcd1234", "name": "demo"}', {"abcd1234"}),
    ("machine example.com login bob password hunter22", {"hunter22"}),
    ('  "private_key": "-----BEGIN KEY-----\\nMIIEvQIBADANBgkqhkiG9w0B\\n-----END KEY-----\\n",',
     {"-----BEGIN KEY-----\\nMIIEvQIBADANBgkqhkiG9w0B\\n-----END KEY-----\\n",
      "MIIEvQIBADANBgkqhkiG9w0B"}),
    ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\n-----END PRIVATE KEY-----",
     {"MIIEvQIBADANBgkqhkiG9w0B"}),
    ("DEBUG=true\nPORT=8080\nNAME=production", set()),
    ("# a comment with sk-ABCDEFGHIJ12345", set()),
])
def test_the_values_of_a_secret_file_are_found_and_plain_settings_are_left(text, expected):
    assert values_in(text) == expected


async def test_secret_values_are_replaced_in_every_string_of_a_result(tmp_path):
    (tmp_path / ".env").write_text(f"API_KEY={TOKEN}\n")
    redaction = SecretRedaction(["own-secret-value-1"])
    result = {"stdout": f"key is {TOKEN}", "nested": [{"x": "own-secret-value-1"}], "n": 3,
              TOKEN: True}
    scrubbed = await redaction.scrub([tmp_path], result)
    assert scrubbed == {"stdout": f"key is {REDACTED}", "nested": [{"x": REDACTED}], "n": 3,
                        REDACTED: True}


async def test_a_url_encoded_secret_is_replaced_too(tmp_path):
    redaction = SecretRedaction(["p@ss/word+1"])
    assert await redaction.scrub([tmp_path], "u=p%40ss%2Fword%2B1") == f"u={REDACTED}"


async def test_an_error_message_is_scrubbed(tmp_path):
    (tmp_path / "credentials.json").write_text(f'{{"token": "{TOKEN}"}}')
    error = ToolError("external_error", f"server said {TOKEN}", "retry", {"body": TOKEN})
    scrubbed = await SecretRedaction().scrub_error([tmp_path], error)
    assert TOKEN not in scrubbed.message and scrubbed.details == {"body": REDACTED}


async def test_an_error_message_keeps_its_words_for_each_reader_unless_a_secret_is_cut(tmp_path):
    (tmp_path / ".env").write_text(f"API_KEY={TOKEN}\n")
    redaction = SecretRedaction()
    plain = Phrase("{path} does not exist in the workspace.", path="notes/a.md")
    kept = await redaction.scrub_error([tmp_path], ToolError("not_found", plain))
    assert kept.message is plain
    leaking = Phrase("Could not talk to {host}: {why}.", host="example.com", why=TOKEN)
    cut = await redaction.scrub_error([tmp_path], ToolError("network_error", leaking))
    assert cut.message == f"Could not talk to example.com: {REDACTED}."
    assert not isinstance(cut.message, Phrase)   # its values hold the secret: the text alone


async def test_nothing_to_redact_returns_the_result_itself(tmp_path):
    result = {"stdout": "hello"}
    assert await SecretRedaction().scrub([tmp_path], result) is result


async def test_an_unchanged_secret_file_is_not_read_again_and_a_changed_one_is(tmp_path, monkeypatch):
    env = tmp_path / ".env"
    env.write_text(f"API_KEY={TOKEN}\n")
    redaction = SecretRedaction()
    opened: list[str] = []
    real_open = open

    def counting(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(secret_redaction, "open", counting, raising=False)
    assert await redaction.scrub([tmp_path], TOKEN) == REDACTED
    assert await redaction.scrub([tmp_path], TOKEN) == REDACTED
    assert len(opened) == 1
    env.write_text("API_KEY=another-Secret-99\n")
    assert await redaction.scrub([tmp_path], "another-Secret-99") == REDACTED
    assert len(opened) == 2


async def test_what_only_an_undo_reads_is_kept_so_a_revert_restores_the_file_exactly(tmp_path):
    (tmp_path / ".env").write_text(f"API_KEY={TOKEN}\n")
    result = {"diff": f"-{TOKEN}", "undo": {"previous": TOKEN}, "_hash": TOKEN}
    scrubbed = await SecretRedaction().scrub([tmp_path], result)
    assert scrubbed == {"diff": f"-{REDACTED}", "undo": {"previous": TOKEN}, "_hash": TOKEN}


async def test_a_token_in_a_git_remote_url_is_redacted(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = https://bot:ghp_tok3nValue@github.com/a/b.git\n')
    scrubbed = await SecretRedaction().scrub([tmp_path], "origin https://bot:ghp_tok3nValue@github.com")
    assert "ghp_tok3nValue" not in scrubbed
