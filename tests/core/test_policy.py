"""The policy: the autonomy × risk matrix, every profile rule, and the catalog agreeing with it.

Small fake tools are defined here; the policy, the registry and `risk_of` are the real ones. For
every case the catalog (`list_for_sender` / `catalog_for_prompt`) must agree with `decide()`:
a tool is offered exactly when some invocation of it could run for that caller.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.core.policy import Caller, Profile, decide
from bot.core.tool import BaseTool, CallContext, ToolMeta, risk_of
from bot.toolbox.registry import Registry

SCHEMA = {"type": "object", "properties": {"cmd": {"type": "string"}}, "additionalProperties": False}


class FakeTool(BaseTool):
    def __init__(self, name: str, risk: str = "low", *, side_effects: bool = True,
                 dry_run: bool = True, cli_only: bool = False):
        self.meta = ToolMeta(name=name, description=f"fake {name}", schema=SCHEMA,
                             has_side_effects=side_effects, risk=risk,  # type: ignore[arg-type]
                             supports_dry_run=dry_run, cli_only=cli_only, returns_untrusted=False)

    async def execute(self, ctx: CallContext, **args: Any) -> dict[str, Any]:
        return {"ran": self.meta.name}


class ShellLike(FakeTool):
    """Medium for a known read-only command, high for anything else (risk_for only raises)."""

    def risk_for(self, args: dict[str, Any]) -> str:
        return "medium" if args.get("cmd") in ("ls", "pwd") else "high"


class Underclaimer(FakeTool):
    """Its risk_for claims low; meta.risk is the floor, so it stays medium."""

    def risk_for(self, args: dict[str, Any]) -> str:
        return "low"


def caller(sender: str = "telegram:1", autonomy: str = "supervised", **kwargs: Any) -> Caller:
    return Caller(sender, autonomy, **kwargs)


def verdict(tool: FakeTool, who: Caller, profile: Profile = Profile(), args: dict | None = None) -> str:
    return decide(tool.meta, risk_of(tool, args or {}), who, profile).verdict


def catalog_names(registry: Registry, who: Caller) -> set[str]:
    """The catalog through both public views, which must agree with each other."""
    listed = {t.meta.name for t in registry.list_for_sender(who.sender, who.autonomy, who.run_allowlist)}
    prompt = {t["name"] for t in registry.catalog_for_prompt(who.sender, who.autonomy, who.run_allowlist)}
    assert listed == prompt
    return listed


def assert_catalog_agrees_with_decide(registry: Registry, who: Caller) -> set[str]:
    """A tool is in the catalog iff decide() at its least risk does not deny it."""
    names = catalog_names(registry, who)
    for tool in registry.list_all():
        reachable = decide(tool.meta, tool.meta.risk, who, registry.profile).verdict != "deny"
        assert (tool.meta.name in names) == reachable, tool.meta.name
    return names


def registry_of(*tools: FakeTool, profile: Profile = Profile()) -> Registry:
    registry = Registry(profile)
    for tool in tools:
        registry.register(tool, "tests")
    return registry


# --- the matrix ------------------------------------------------------------------------------

MATRIX_TABLE = [
    # risk      read_only   supervised  full
    ("low",    ("allow",    "allow",    "allow")),
    ("medium", ("deny",     "ask",      "allow")),
    ("high",   ("deny",     "deny",     "ask")),
]
MATRIX_CASES = [(risk, level, expected)
                for risk, row in MATRIX_TABLE
                for level, expected in zip(("read_only", "supervised", "full"), row, strict=True)]


@pytest.mark.parametrize(("risk", "autonomy", "expected"), MATRIX_CASES)
def test_the_matrix_decides_each_risk_at_each_autonomy(risk, autonomy, expected):
    tool = FakeTool("probe", risk)
    who = caller(autonomy=autonomy)
    assert verdict(tool, who) == expected
    names = assert_catalog_agrees_with_decide(registry_of(tool), who)
    assert ("probe" in names) == (expected != "deny")


@pytest.mark.parametrize("autonomy", ["pairing", "ignore", "", "root"])
def test_a_sender_without_a_level_can_run_nothing_and_sees_no_tools(autonomy):
    tool = FakeTool("probe", "low", side_effects=False)
    who = caller(autonomy=autonomy)
    assert verdict(tool, who) == "deny"
    assert assert_catalog_agrees_with_decide(registry_of(tool), who) == set()


def test_an_unknown_risk_value_counts_as_high():
    tool = FakeTool("probe", "low")
    assert decide(tool.meta, "catastrophic", caller(autonomy="supervised"), Profile()).verdict == "deny"  # type: ignore[arg-type]
    assert decide(tool.meta, "catastrophic", caller(autonomy="full"), Profile()).verdict == "ask"  # type: ignore[arg-type]


def test_risk_for_raises_the_risk_per_invocation_but_never_lowers_it():
    shell = ShellLike("shell_like", "medium")
    under = Underclaimer("under", "medium")
    supervised = caller(autonomy="supervised")
    assert verdict(shell, supervised, args={"cmd": "ls"}) == "ask"
    assert verdict(shell, supervised, args={"cmd": "rm -rf /"}) == "deny"
    assert verdict(under, supervised, args={"cmd": "x"}) == "ask"
    # Its floor is medium, so a supervised sender still sees it (some calls could be approved).
    assert {"shell_like", "under"} <= assert_catalog_agrees_with_decide(registry_of(shell, under), supervised)


def test_the_policy_applies_the_floor_even_when_the_caller_passes_a_lower_risk():
    tool = FakeTool("probe", "high")
    assert decide(tool.meta, "low", caller(autonomy="supervised"), Profile()).verdict == "deny"


# --- side-effect tools without dry_run -----------------------------------------------------


def test_a_side_effect_tool_without_dry_run_is_high_risk_and_never_auto_approved():
    blind = FakeTool("blind_write", "low", dry_run=False)
    profile = Profile(auto_approve=frozenset({"blind_write"}))
    full = caller(autonomy="full", session_auto_approve=frozenset({"blind_write"}))
    assert risk_of(blind, {}) == "high"
    assert decide(blind.meta, "low", full, profile).verdict == "ask"
    assert decide(blind.meta, "low", caller(autonomy="supervised"), profile).verdict == "deny"
    registry = registry_of(blind, profile=profile)
    assert "blind_write" in assert_catalog_agrees_with_decide(registry, full)
    assert "blind_write" not in assert_catalog_agrees_with_decide(registry, caller(autonomy="supervised"))


def test_a_read_only_tool_without_dry_run_keeps_its_low_risk():
    reader = FakeTool("reader", "low", side_effects=False, dry_run=False)
    assert verdict(reader, caller(autonomy="read_only")) == "allow"


# --- cli_only and excluded_tools -------------------------------------------------------------


@pytest.mark.parametrize("sender", ["telegram:1", "discord:2"])
def test_a_cli_only_tool_is_refused_and_hidden_outside_the_terminal(sender):
    tool = FakeTool("local_admin", "low", cli_only=True)
    registry = registry_of(tool)
    remote = caller(sender=sender, autonomy="full")
    decision = decide(tool.meta, "low", remote, Profile())
    assert decision.verdict == "deny" and "CLI" in decision.reason
    assert "local_admin" not in assert_catalog_agrees_with_decide(registry, remote)
    terminal = caller(sender="cli:local", autonomy="full")
    assert verdict(tool, terminal) == "allow"
    assert "local_admin" in assert_catalog_agrees_with_decide(registry, terminal)


@pytest.mark.parametrize("sender", ["telegram:1", "discord:2"])
def test_an_excluded_tool_is_removed_from_non_cli_channels_only(sender):
    tool = FakeTool("shell_run", "medium")
    mcp = FakeTool("github__delete_repo", "medium")
    profile = Profile(excluded_tools=frozenset({"shell_run", "github__delete_repo"}))
    registry = registry_of(tool, mcp, profile=profile)
    remote = caller(sender=sender, autonomy="full")
    for blocked in (tool, mcp):
        assert verdict(blocked, remote, profile) == "deny"
    assert assert_catalog_agrees_with_decide(registry, remote) == set()
    terminal = caller(sender="cli:local", autonomy="full")
    assert verdict(tool, terminal, profile) == "allow"
    assert assert_catalog_agrees_with_decide(registry, terminal) == {"shell_run", "github__delete_repo"}


# --- allowed_tools and the MCP exception ---------------------------------------------------


def test_allowed_tools_restricts_every_channel_but_admits_mcp_tools_automatically():
    listed, unlisted = FakeTool("fs_read", "low"), FakeTool("fs_write", "low")
    mcp = FakeTool("github__list_issues", "low")
    profile = Profile(allowed_tools=frozenset({"fs_read"}))
    registry = registry_of(listed, unlisted, mcp, profile=profile)
    for who in (caller(autonomy="full"), caller(sender="cli:local", autonomy="full")):
        assert verdict(listed, who, profile) == "allow"
        assert verdict(unlisted, who, profile) == "deny"
        assert verdict(mcp, who, profile) == "allow"
        assert assert_catalog_agrees_with_decide(registry, who) == {"fs_read", "github__list_issues"}


def test_an_empty_allowed_tools_means_no_restriction():
    registry = registry_of(FakeTool("a", "low"), FakeTool("b", "low"))
    assert assert_catalog_agrees_with_decide(registry, caller()) == {"a", "b"}


# --- per-run allowlist -------------------------------------------------------------------------


def test_a_run_allowlist_is_a_strict_intersection_without_the_mcp_exception():
    cron, other = FakeTool("cron_add", "low"), FakeTool("fs_read", "low")
    mcp = FakeTool("github__list_issues", "low")
    not_in_profile = FakeTool("web_fetch", "low")
    profile = Profile(allowed_tools=frozenset({"cron_add", "fs_read"}))
    registry = registry_of(cron, other, mcp, not_in_profile, profile=profile)
    who = caller(autonomy="full", run_allowlist=frozenset({"cron_add", "web_fetch"}))
    assert verdict(cron, who, profile) == "allow"
    assert verdict(other, who, profile) == "deny"          # profile allows it, the run does not
    assert verdict(mcp, who, profile) == "deny"            # the profile would admit it, the run names it not
    assert verdict(not_in_profile, who, profile) == "deny"  # the run cannot widen the profile
    assert assert_catalog_agrees_with_decide(registry, who) == {"cron_add"}


def test_an_empty_run_allowlist_allows_nothing():
    registry = registry_of(FakeTool("a", "low"))
    assert assert_catalog_agrees_with_decide(registry, caller(run_allowlist=frozenset())) == set()


# --- auto_approve, always_ask and the session's "always" ---------------------------------------


def test_auto_approve_turns_ask_into_run_but_never_deny_into_anything():
    medium, high = FakeTool("fs_write", "medium"), FakeTool("shell_run", "high")
    profile = Profile(auto_approve=frozenset({"fs_write", "shell_run"}))
    supervised = caller(autonomy="supervised")
    assert verdict(medium, supervised) == "ask"
    assert verdict(medium, supervised, profile) == "allow"
    assert verdict(high, supervised, profile) == "deny"
    assert verdict(high, caller(autonomy="full"), profile) == "allow"
    registry = registry_of(medium, high, profile=profile)
    assert assert_catalog_agrees_with_decide(registry, supervised) == {"fs_write"}


def test_always_ask_turns_run_into_ask_and_beats_auto_approve():
    tool = FakeTool("send_mail", "low")
    profile = Profile(always_ask=frozenset({"send_mail"}), auto_approve=frozenset({"send_mail"}))
    for autonomy in ("read_only", "supervised", "full"):
        assert verdict(tool, caller(autonomy=autonomy), profile) == "ask"
    assert "send_mail" in assert_catalog_agrees_with_decide(registry_of(tool, profile=profile), caller())


def test_always_ask_does_not_rescue_a_denied_call():
    tool = FakeTool("shell_run", "high")
    profile = Profile(always_ask=frozenset({"shell_run"}))
    assert verdict(tool, caller(autonomy="supervised"), profile) == "deny"


def test_a_session_always_choice_auto_approves_only_that_tool():
    write, other = FakeTool("fs_write", "medium"), FakeTool("fs_move", "medium")
    who = caller(autonomy="supervised", session_auto_approve=frozenset({"fs_write"}))
    assert verdict(write, who) == "allow"
    assert verdict(other, who) == "ask"
    profile = Profile(always_ask=frozenset({"fs_write"}))
    assert verdict(write, who, profile) == "ask"


# --- taint, egress and disclosure ------------------------------------------------------------


class Outbound(FakeTool):
    """A way out (egress), by meta or only for some arguments."""

    def __init__(self, name: str, risk: str = "low", *, egress: bool | None = True,
                 discloses: bool = False, by_args: bool = False):
        super().__init__(name, risk)
        self.meta = ToolMeta(**{**self.meta.__dict__, "egress": egress, "discloses": discloses})
        self.by_args = by_args

    def egress_for(self, args: dict[str, Any]) -> bool:
        return self.by_args and args.get("cmd") == "create"


def judged(tool: FakeTool, autonomy: str, tainted: bool, args: dict | None = None,
           profile: Profile = Profile(), **kwargs: Any) -> str:
    from dataclasses import replace

    from bot.core.tool import egress_of
    args = args or {}
    meta = replace(tool.meta, egress=True) if egress_of(tool, args) else tool.meta
    return decide(meta, risk_of(tool, args), caller(autonomy=autonomy, **kwargs), profile,
                  tainted=tainted).verdict


SEND = Outbound("send_like")
LOCAL = Outbound("local_like", egress=False)
UNDECLARED = Outbound("undeclared_like", egress=None)
REMIND = Outbound("remind_like", egress=False, by_args=True)
SHARE = Outbound("share_like", "medium", discloses=True)

EGRESS_TABLE = [
    # tool, args, tainted, read_only, supervised, full
    (SEND, {}, False, "allow", "allow", "allow"),
    (SEND, {}, True, "deny", "ask", "allow"),
    (LOCAL, {}, True, "allow", "allow", "allow"),
    (UNDECLARED, {}, True, "allow", "allow", "allow"),      # built-ins all declare (conformance)
    (REMIND, {"cmd": "list"}, True, "allow", "allow", "allow"),
    (REMIND, {"cmd": "create"}, False, "allow", "allow", "allow"),
    (REMIND, {"cmd": "create"}, True, "deny", "ask", "allow"),   # a reminder posts later
    (SHARE, {}, False, "deny", "ask", "ask"),                 # asked every time, full too
    (SHARE, {}, True, "deny", "ask", "ask"),
]


@pytest.mark.parametrize(("tool", "args", "tainted", "read_only", "supervised", "full"),
                         EGRESS_TABLE, ids=[f"{t.meta.name}-{a}-{'tainted' if x else 'clean'}"
                                            for t, a, x, *_ in EGRESS_TABLE])
def test_after_taint_a_way_out_is_at_least_medium_and_a_disclosure_is_always_asked(
        tool, args, tainted, read_only, supervised, full):
    got = [judged(tool, level, tainted, args) for level in ("read_only", "supervised", "full")]
    assert got == [read_only, supervised, full]


def test_neither_auto_approve_nor_an_always_grant_lets_a_tainted_way_out_or_a_disclosure_run():
    profile = Profile(auto_approve=frozenset({"send_like", "share_like", "remind_like"}))
    grant = {"session_auto_approve": frozenset({"send_like", "share_like", "remind_like"})}
    assert judged(SEND, "supervised", True, profile=profile, **grant) == "ask"
    assert judged(REMIND, "supervised", True, {"cmd": "create"}, profile=profile, **grant) == "ask"
    assert judged(SHARE, "supervised", False, profile=profile, **grant) == "ask"
    assert judged(SHARE, "full", False, profile=profile, **grant) == "ask"
    assert judged(SEND, "supervised", False, profile=profile, **grant) == "allow"  # clean: as before
