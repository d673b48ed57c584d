"""Custom tool modules: discovery, dedupe, clashes, metadata files, broken modules, safe defaults,
and the same conformance suite as the built-ins."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from bot.app import build_tools
from bot.core.policy import Profile
from bot.core.tool import NO_PREVIEW, ToolMeta
from bot.toolbox.custom_tools import CustomToolError, LoadReport, load_custom_tools, normalise_tool
from bot.toolbox.registry import Registry
from tests.conftest import FAKE_ENV, make_config
from tests.support import conformance

EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "custom_tool_example.py"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


def tool_module(name: str, extra: str = "") -> str:
    """Source of a small, conforming, side-effect-free custom tool called `name`."""
    return textwrap.dedent(f'''
        from bot.core.tool import BaseTool, ToolMeta

        class Tool(BaseTool):
            meta = ToolMeta(name="{name}", description="Says which tool it is.",
                            schema={{"type": "object", "properties": {{}}, "additionalProperties": False}},
                            has_side_effects=False, risk="low", returns_untrusted=False,
                            capability_required="test:read", egress=False)

            async def execute(self, ctx, **args):
                return {{"tool": "{name}"}}

        def build():
            return Tool()
        {extra}
    ''')


def write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


class Setup:
    """A project dir (the cwd), a HOME and a config whose custom_paths are given per test."""

    def __init__(self, tmp_path: Path):
        self.root = tmp_path
        self.project = tmp_path / "project"
        self.home = tmp_path / "home"
        self.project.mkdir()
        self.home.mkdir()

    @property
    def project_tools(self) -> Path:
        return self.project / ".myclaw" / "tools"

    @property
    def user_tools(self) -> Path:
        return self.home / ".myclaw" / "tools"

    def config(self, custom_paths: list[str] | None = None):
        return make_config(self.root, {"tools": {"custom_paths": custom_paths or []}},
                           env={**FAKE_ENV, "HOME": str(self.home)})

    def load(self, custom_paths: list[str] | None = None,
             registry: Registry | None = None) -> tuple[Registry, LoadReport]:
        registry = registry or Registry(Profile())
        return registry, load_custom_tools(registry, self.config(custom_paths), self.project)


@pytest.fixture
def setup(tmp_path) -> Setup:
    return Setup(tmp_path)


def test_tools_are_discovered_in_the_project_the_user_home_and_configured_paths(setup):
    write(setup.project_tools / "proj.py", tool_module("proj_tool"))
    write(setup.user_tools / "user.py", tool_module("user_tool"))
    write(setup.project / "extra" / "a.py", tool_module("extra_tool"))
    single = write(setup.home / "single" / "one.py", tool_module("single_tool"))
    registry, report = setup.load(["extra", "~/single/one.py"])
    assert report.errors == {}
    assert set(report.loaded) == {"proj_tool", "user_tool", "extra_tool", "single_tool"}
    assert report.loaded["single_tool"] == str(single)
    assert registry.source_of("proj_tool") == str(setup.project_tools / "proj.py")
    assert registry.get("user_tool").meta.capability_required == "test:read"


async def test_a_loaded_tool_runs_like_a_builtin(setup, ctx):
    write(setup.project_tools / "proj.py", tool_module("proj_tool"))
    registry, _ = setup.load()
    assert await registry.get("proj_tool").execute(ctx) == {"tool": "proj_tool"}


def test_a_directory_listed_twice_or_through_a_symlink_is_loaded_once(setup):
    module = write(setup.root / "shared" / "tools.py", tool_module("shared_tool"))
    os.symlink(setup.root / "shared", setup.root / "link")
    _, report = setup.load([str(setup.root / "shared"), str(setup.root / "shared"),
                            str(setup.root / "link"), str(module)])
    assert report.errors == {}
    assert report.loaded == {"shared_tool": str(module)}


def test_a_name_clash_with_a_builtin_is_refused_naming_both_files(setup):
    clash = write(setup.project_tools / "time.py", tool_module("time_now"))
    write(setup.project_tools / "fine.py", tool_module("fine_tool"))
    registry, report = build_tools(setup.config(), cwd=setup.project)
    error = report.errors[str(clash)]
    assert str(clash) in error and os.path.join("tools", "time_now.py") in error
    assert registry.source_of("time_now") == "tools.time_now"
    assert registry.get("fine_tool") is not None
    assert report.loaded == {"fine_tool": str(setup.project_tools / "fine.py")}


def test_a_clash_between_two_custom_modules_keeps_the_first_and_names_both_files(setup):
    first = write(setup.project_tools / "twin.py", tool_module("twin"))
    second = write(setup.user_tools / "twin.py", tool_module("twin"))
    _, report = setup.load()
    assert report.loaded == {"twin": str(first)}
    assert str(first) in report.errors[str(second)] and str(second) in report.errors[str(second)]


def test_markdown_and_json_files_are_metadata_and_never_executed(setup):
    marker = setup.root / "executed"
    payload = f"open({str(marker)!r}, 'w').write('ran')\n"
    write(setup.project_tools / "README.md", payload)
    write(setup.project_tools / "tool.json", payload)
    write(setup.project_tools / "real.py", tool_module("real_tool"))
    _, report = setup.load()
    assert sorted(Path(p).name for p in report.metadata) == ["README.md", "tool.json"]
    assert report.errors == {} and set(report.loaded) == {"real_tool"}
    assert not marker.exists()


BROKEN = {
    "syntax.py": ("def broken(:\n", "syntax error at line 1"),
    "raises.py": ("raise RuntimeError('no database here')\n", "RuntimeError: no database here"),
    "exits.py": ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    "nobuild.py": ("VALUE = 1\n", "no build() function"),
    "badbuild.py": ("def build():\n    raise KeyError('token')\n", "build() failed: KeyError"),
    "asyncbuild.py": ("async def build():\n    return None\n", "not async"),
}


def test_a_module_that_fails_is_reported_in_one_line_and_the_others_still_load(setup):
    for name, (source, _) in BROKEN.items():
        write(setup.project_tools / name, source)
    write(setup.project_tools / "good.py", tool_module("good_tool"))
    registry, report = setup.load()
    assert set(report.loaded) == {"good_tool"} and registry.get("good_tool") is not None
    for name, (_, expected) in BROKEN.items():
        error = report.errors[str(setup.project_tools / name)]
        assert expected in error and "\n" not in error


def test_build_may_take_the_config_and_may_declare_the_tool_unavailable(setup):
    write(setup.project_tools / "configured.py", tool_module("configured_tool").replace(
        "def build():\n    return Tool()",
        "def build(config):\n    assert config['tools']['custom_paths'] == []\n    return Tool()"))
    write(setup.project_tools / "needs_key.py", textwrap.dedent('''
        from bot.core.tool import ToolUnavailable

        def build():
            raise ToolUnavailable("set WEATHER_API_KEY to enable the weather tool")
    '''))
    registry, report = setup.load()
    assert set(report.loaded) == {"configured_tool"} and report.errors == {}
    assert registry.unavailable[str(setup.project_tools / "needs_key.py")] == (
        "set WEATHER_API_KEY to enable the weather tool")


DECLARES_NOTHING = '''
from bot.core.tool import ToolMeta

class Hello:
    def __init__(self, name):
        self.meta = ToolMeta(name=name, description="Greets someone.",
                             schema={"type": "object", "properties": {}})

    async def execute(self, ctx, **args):
        return {"greeting": "hello"}

def build():
    return [Hello("hello"), Hello("plain")]
'''


async def test_a_tool_that_declares_nothing_is_side_effecting_high_risk_and_without_preview(
        setup, ctx):
    write(setup.project_tools / "hello.py", DECLARES_NOTHING)
    registry, report = setup.load()
    assert set(report.loaded) == {"hello", "plain"}
    for name in ("hello", "plain"):
        tool = registry.get(name)
        meta = tool.meta
        assert (meta.has_side_effects, meta.risk, meta.supports_dry_run, meta.returns_untrusted) == (
            True, "high", False, True)
        assert meta.schema == {"type": "object", "properties": {}, "additionalProperties": False}
        assert await tool.dry_run(ctx) == {"summary": NO_PREVIEW}
        assert await tool.execute(ctx) == {"greeting": "hello"}
        conformance.check_metadata(tool)
    full = {t["name"] for t in registry.catalog_for_prompt("cli:local", "full")}
    supervised = {t["name"] for t in registry.catalog_for_prompt("telegram:1", "supervised")}
    assert {"hello", "plain"} <= full and not {"hello", "plain"} & supervised


def meta(name: str, **fields) -> ToolMeta:
    return ToolMeta(name=name, description=fields.pop("description", "d"),
                    schema=fields.pop("schema", {"type": "object", "properties": {}}), **fields)


def test_a_side_effect_without_preview_declared_low_risk_is_raised_to_high():
    class Sneaky:
        def __init__(self):
            self.meta = meta("sneaky", description="Deletes things.", risk="low")

        async def execute(self, ctx, **args):
            return {}

    assert normalise_tool(Sneaky(), "sneaky.py").meta.risk == "high"


async def async_execute(ctx, **args):  # a valid execute for the dict cases below
    return {}


class NeedsArgs:
    def __init__(self, x):
        self.x = x


class Shaped:
    """The documented shape, with whatever metadata and execute a case gives it."""

    def __init__(self, tool_meta: ToolMeta, execute=async_execute):
        self.meta = tool_meta
        self.execute = execute


class Attributes:
    name, description = "attrs", "Fields as attributes, no ToolMeta."

    async def execute(self, ctx, **args):
        return {}


@pytest.mark.parametrize(("obj", "message"), [
    (Shaped(meta("Bad-Name")), "lower_snake_case"),
    (Shaped(meta("fake__mcp")), "reserved for MCP"),
    (Shaped(meta("nodesc", description=" ")), "non-empty description"),
    (Shaped(meta("syncy"), lambda ctx: {}), "async def"),
    (Shaped(meta("flag", has_side_effects="no")), "has_side_effects must be true or false"),
    (Shaped(meta("shape", schema={"type": "string"})), "JSON Schema object"),
    (Shaped(meta("liar", supports_dry_run=True)), "declares supports_dry_run but has no dry_run"),
    (NeedsArgs, "returned the class NeedsArgs"),
    ({"name": "plain", "description": "d", "execute": async_execute},
     "returned a dict; expected a tool object with `meta = ToolMeta("),
    (Attributes(), "returned a Attributes object whose `meta` is not a ToolMeta; expected a tool"),
    (Shaped({"name": "dict_meta", "description": "d"}),  # type: ignore[arg-type]
     "returned a Shaped object whose `meta` is not a ToolMeta; expected"),
    (NeedsArgs(1), "docs/extending.md"),
])
def test_objects_that_cannot_be_tools_are_refused_with_a_clear_message(obj, message):
    with pytest.raises(CustomToolError) as refused:
        normalise_tool(obj, "module.py")
    assert message in str(refused.value)


def test_a_well_formed_tool_is_registered_as_the_authors_own_object(setup):
    write(setup.project_tools / "proj.py", tool_module("proj_tool"))
    registry, _ = setup.load()
    assert type(registry.get("proj_tool")).__name__ == "Tool"


def test_an_adapted_tool_exposes_exactly_the_optional_methods_its_author_wrote():
    class WithRevert:
        meta = ToolMeta(name="with_revert", description="Reverts.",
                        schema={"type": "object", "properties": {}})

        async def execute(self, ctx, **args):
            return {}

        async def revert(self, ctx, args, result):
            return {"reverted": True}

    adapted = normalise_tool(WithRevert(), "m.py")
    assert callable(getattr(adapted, "revert", None))
    assert getattr(adapted, "risk_for", None) is None and getattr(adapted, "on_session", None) is None


def test_code_the_agent_could_have_written_is_never_executed(setup):
    marker = setup.root / "executed"
    config = setup.config()
    inside = write(config.workspace / ".myclaw" / "tools" / "evil.py",
                   f"open({str(marker)!r}, 'w').write('ran')\n")
    shared = write(setup.root / "open" / "shared.py", f"open({str(marker)!r}, 'w').write('ran')\n")
    os.chmod(shared.parent, 0o777)
    registry = Registry(Profile())
    report = load_custom_tools(registry, setup.config([str(shared)]), config.workspace)
    assert "inside the agent workspace" in report.errors[str(inside)]
    assert "world-writable" in report.errors[str(shared)]
    assert not marker.exists()


def test_a_missing_configured_path_is_reported_but_missing_default_folders_are_not(setup):
    _, report = setup.load(["nowhere"])
    assert report.errors == {str(setup.project / "nowhere"): "configured custom tool path does not exist"}
    assert str(setup.project_tools) in report.searched and str(setup.user_tools) in report.searched


async def test_custom_tools_pass_the_conformance_checks(setup, store, ctx):
    write(setup.project_tools / "proj.py", tool_module("proj_tool"))
    write(setup.project_tools / "hello.py", DECLARES_NOTHING)
    registry, report = setup.load([str(EXAMPLE)])
    assert set(report.loaded) == {"proj_tool", "hello", "plain", "word_count"}
    conformance.check_unique_names(registry)
    for tool in registry.list_all():
        conformance.check_metadata(tool)
        conformance.check_invalid_args_rejected(registry, tool.meta.name)
        await conformance.check_dry_run(tool, ctx, store)


async def test_the_documented_example_is_the_tested_file_and_passes_the_conformance_suite(
        setup, store, ctx):
    assert EXAMPLE.read_text(encoding="utf-8").strip() in DOCS.read_text(encoding="utf-8")
    registry, report = setup.load([str(EXAMPLE)])
    tool = registry.get("word_count")
    assert report.errors == {} and isinstance(tool.meta, ToolMeta)
    conformance.check_metadata(tool)
    conformance.check_invalid_args_rejected(registry, "word_count")
    await conformance.check_dry_run(tool, ctx, store)
    assert await tool.execute(ctx, text="a b\nc") == {"words": 3, "lines": 2}
