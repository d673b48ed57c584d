"""The terminal channel's `/attach FILE [message]` and send_file, driven through `myclaw chat`."""

from __future__ import annotations

from tests.fakes.anthropic_server import FakeAnthropic, reply, text, tool_use
from tests.ops.test_cli import base_env, run_cli
from tests.support.media_support import jpeg


def test_attach_sends_a_photo_with_its_message_and_help_documents_it(tmp_path):
    (tmp_path / "my photo.jpg").write_bytes(jpeg(200, 100))
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(text("A photo."))
        env = base_env(tmp_path, ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=fake.base_url)
        stdin = f'/attach "{tmp_path}/my photo.jpg" what is this?\n/attach {tmp_path}/missing.pdf\n/help\n'
        proc = run_cli("chat", env=env, stdin=stdin)
        blocks = fake.fake.requests[-1].json["messages"][-1]["content"]
    assert proc.returncode == 0, proc.stderr
    assert [b["type"] for b in blocks] == ["text", "image", "text"] and blocks[2]["text"] == "what is this?"
    assert "A photo." in proc.stdout
    assert f"/attach: cannot read {tmp_path}/missing.pdf" in proc.stdout
    assert "/attach FILE [message]" in proc.stdout


def test_a_file_sent_by_the_agent_is_shown_by_its_workspace_path(tmp_path):
    with FakeAnthropic.start_in_thread() as fake:
        fake.script(reply(tool_use("fs_write", {"path": "out/report.md", "content": "# hi"})),
                    reply(tool_use("send_file", {"path": "out/report.md", "caption": "the report"})),
                    text("Done."))
        env = base_env(tmp_path, ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=fake.base_url)
        proc = run_cli("chat", env=env, stdin="write and send the report\ny\n")
    assert proc.returncode == 0, proc.stderr
    assert "📎 out/report.md (4 bytes, in the workspace) — the report" in proc.stdout
