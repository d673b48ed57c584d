"""The picture stays true: dependencies point inward and no import cycle appears (see
tests/support/import_graph.py for the rules and what counts as an import)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support.import_graph import (
    cycles,
    imports,
    layering_violations,
    package_cycles,
    package_violations,
)

ROOT = Path(__file__).resolve().parents[1]


def test_the_core_names_channels_and_tools_only_in_the_composition_root_and_they_never_meet():
    assert layering_violations(ROOT) == []


def test_no_import_cycle_among_the_projects_modules_counting_type_only_and_deferred_imports():
    assert cycles(ROOT) == []


def test_no_cycle_between_packages():
    assert package_cycles(ROOT) == []


def test_each_package_of_the_core_imports_only_what_it_may():
    assert package_violations(ROOT) == []


def test_nothing_but_the_composition_root_lives_directly_in_bot():
    loose = {p.name for p in (ROOT / "bot").glob("*.py")} - {"__init__.py", "__main__.py", "app.py"}
    assert loose == set()


def test_no_package_of_the_core_has_more_than_twelve_modules():
    crowded = {p.name: n for p in (ROOT / "bot").iterdir()
               if p.is_dir() and (n := len(list(p.glob("*.py")))) > 12}
    assert crowded == {}


def test_the_checker_reads_the_whole_tree():
    importers = {imp.importer for imp in imports(ROOT)}
    assert {"bot.app", "bot.runtime.agent", "channels.telegram.channel", "tools.fs_write"} <= importers


def plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


CLEAN = {
    "bot/__init__.py": "",
    "bot/app.py": "import channels.cli\nfrom tools import clock\n",
    "bot/core.py": "from bot import values\n",
    "bot/values.py": "X = 1\n",
    "channels/__init__.py": "",
    "channels/cli.py": "from bot.core import *\n",
    "tools/__init__.py": "",
    "tools/clock.py": "from bot.values import X\n",
}


def test_a_clean_planted_tree_passes(tmp_path):
    root = plant(tmp_path, CLEAN)
    assert layering_violations(root) == [] and cycles(root) == []


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("bot/core.py", "from channels.cli import x\n", "bot.core (line 1) imports channels.cli"),
    ("bot/core.py", "def later():\n    import tools.clock\n", "bot.core (line 2) imports tools.clock"),
    ("bot/core.py", "import importlib\nimportlib.import_module('channels.cli')\n",
     "bot.core (line 2) imports channels.cli"),
    ("bot/core.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import channels\n",
     "bot.core (line 3) imports channels"),
    ("tools/clock.py", "from channels import cli\n", "tools.clock (line 1) imports channels.cli"),
    ("channels/cli.py", "from ..tools import clock\n", "channels.cli (line 1) imports tools.clock"),
])
def test_a_planted_layering_violation_is_reported(tmp_path, name, text, expected):
    root = plant(tmp_path, {**CLEAN, name: text})
    (problem,) = layering_violations(root)
    assert problem.startswith(expected)


def test_a_planted_import_cycle_is_reported(tmp_path):
    root = plant(tmp_path, {**CLEAN, "bot/values.py": "from bot.core import thing\n"})
    assert cycles(root) == [["bot.core", "bot.values"]]


def test_a_function_level_import_back_is_a_cycle_too(tmp_path):
    root = plant(tmp_path, {**CLEAN, "bot/values.py": "def later():\n    from bot import core\n"})
    assert cycles(root) == [["bot.core", "bot.values"]]


def test_a_planted_package_violation_is_reported(tmp_path):
    root = plant(tmp_path, {"bot/__init__.py": "", "bot/core/__init__.py": "",
                            "bot/store/__init__.py": "", "bot/store/sqlite.py": "X = 1\n",
                            "bot/core/tool.py": "from bot.store import sqlite\n"})
    (problem,) = package_violations(root)
    assert problem.startswith("bot.core.tool (line 1) imports bot.store")
