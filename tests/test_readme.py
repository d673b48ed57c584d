"""The README gives what the issues promise: the two commands, the channel guides, a custom
tool example that is the tested one, and the guides kept in step with docs/."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_quick_start_is_exactly_make_run_and_make_test():
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^(make \w+)", quick, flags=re.M)
    assert commands[:2] == ["make run", "make test"]


def test_the_readme_carries_each_guide_as_written_in_docs():
    for name, heading in (("telegram", "## Telegram in 3 minutes"),
                          ("discord", "## Discord in 5 minutes"),
                          ("extending", "## Extending myclaw")):
        assert heading in README
        section = README.split(f"<!-- BEGIN {name} -->", 1)[1].split(f"<!-- END {name} -->", 1)[0]
        doc = (ROOT / "docs" / f"{name}.md").read_text(encoding="utf-8")
        # Same text once headings are demoted one level (outside code blocks).
        normalise = lambda text: re.sub(r"^#+ ", "# ", text.strip(), flags=re.M)  # noqa: E731
        assert normalise(section) == normalise(doc), f"README's {name} guide differs from docs/"


def test_the_readme_shows_the_custom_tool_example_that_the_tests_load():
    example = (ROOT / "tests" / "data" / "custom_tool_example.py").read_text(encoding="utf-8")
    assert example.strip() in README
