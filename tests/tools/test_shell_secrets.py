"""A recursive search is not a way around the .env rule: in a workspace holding .env files it
needs the approval a high-risk command needs."""

from __future__ import annotations

import pytest

from tools import _shell_risk, shell_run

SEARCHES = ["grep -r KEY .", "grep -Rn token", "grep --recursive KEY notes", "rg API_KEY", "rg -i secret"]


@pytest.fixture(autouse=True)
def fresh_scans():
    _shell_risk._secret_scans.clear()
    yield
    _shell_risk._secret_scans.clear()


@pytest.mark.parametrize("command", SEARCHES)
def test_a_recursive_search_is_medium_in_a_clean_workspace_and_high_next_to_a_dotenv(tmp_path, command):
    tool = shell_run.ShellRun(str(tmp_path))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("hello")
    assert tool.risk_for({"command": command}) == "medium"
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / ".env.production").write_text("API_KEY=secret")
    _shell_risk._secret_scans.clear()
    assert tool.risk_for({"command": command}) == "high"
    assert tool.assess(command)[1] == "searches a workspace tree that holds .env files"


@pytest.mark.parametrize("command", ["grep KEY notes/a.md", "cat notes/a.md", "ls -la"])
def test_reading_named_files_stays_medium_next_to_a_dotenv(tmp_path, command):
    (tmp_path / ".env").write_text("API_KEY=secret")
    assert shell_run.ShellRun(str(tmp_path)).risk_for({"command": command}) == "medium"
