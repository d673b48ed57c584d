"""The policy: a pure function from (tool, risk, who, where, profile) to allow | ask | deny.

Asking a human is I/O and lives in the approval layer and the channels; nothing here does I/O.

    risk \\ autonomy   read_only   supervised   full
    low                run         run          run
    medium             deny        ask          run
    high               deny        deny         ask

Profiles refine the matrix: `allowed_tools` (empty = no restriction; MCP names with `__` are
admitted automatically), `excluded_tools` (removed from every non-CLI channel), `auto_approve`
(ask → run), `always_ask` (run → ask). A per-run allowlist is a strict intersection (no MCP
exception). `cli_only` tools never leave the CLI channel, and a side-effect tool without dry_run
is never auto-approved.

Taint: once a turn has read untrusted content, a call that can carry data out (`meta.egress`)
is at least medium risk and is never auto-approved (not by the profile, not by an "Always"
grant): read_only is refused, supervised is asked, full runs it (full means full).

Disclosure: a call that shows the requester's private files or memory to the other people of a
shared conversation (`meta.discloses`) is asked every time, at every level that may run it
(full too), and never auto-approved: the data is the requester's, so the requester decides.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.core.identity import LEVELS, Level, Sender
from bot.core.tool import RISKS, Risk, ToolMeta

Verdict = Literal["allow", "ask", "deny"]
TAINT_REASON = "this turn has read untrusted content"
DISCLOSURE_REASON = "it shows your private data to everyone in this conversation"

MATRIX: dict[tuple[Risk, str], Verdict] = {
    ("low", "read_only"): "allow",
    ("low", "supervised"): "allow",
    ("low", "full"): "allow",
    ("medium", "read_only"): "deny",
    ("medium", "supervised"): "ask",
    ("medium", "full"): "allow",
    ("high", "read_only"): "deny",
    ("high", "supervised"): "deny",
    ("high", "full"): "ask",
}


@dataclass(frozen=True)
class Profile:
    allowed_tools: frozenset[str] = frozenset()
    excluded_tools: frozenset[str] = frozenset()
    auto_approve: frozenset[str] = frozenset()
    always_ask: frozenset[str] = frozenset()
    always_max_risk: Risk = "medium"   # the highest risk an "Always" tap may cover

    @classmethod
    def from_config(cls, table: dict[str, Any]) -> Profile:
        sets = {key: frozenset(table.get(key, ())) for key in
                ("allowed_tools", "excluded_tools", "auto_approve", "always_ask")}
        return cls(**sets, always_max_risk=table.get("always_max_risk", "medium"))


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str

    @property
    def allowed(self) -> bool:
        return self.verdict == "allow"


@dataclass(frozen=True)
class Caller:
    """Who asks, from where (the sender's channel)."""

    sender: str
    autonomy: str
    run_allowlist: frozenset[str] | None = None
    session_auto_approve: frozenset[str] = field(default_factory=frozenset)

    @property
    def channel(self) -> str:
        return Sender.parse(self.sender).channel

    @property
    def is_cli(self) -> bool:
        return self.channel == "cli"


def is_mcp_name(name: str) -> bool:
    return "__" in name


def access(meta: ToolMeta, caller: Caller, profile: Profile) -> Decision | None:
    """The part of the decision that does not depend on the args: may this caller see the tool?

    Returns a deny Decision, or None when the tool is reachable (the matrix decides the rest).
    """
    name = meta.name
    if caller.autonomy not in LEVELS:
        return Decision("deny", f"sender has no autonomy level ({caller.autonomy})")
    if meta.cli_only and not caller.is_cli:
        return Decision("deny", f"{name} is available only in the terminal (CLI) channel")
    if name in profile.excluded_tools and not caller.is_cli:
        return Decision("deny", f"{name} is excluded from non-CLI channels by the profile")
    if profile.allowed_tools and name not in profile.allowed_tools and not is_mcp_name(name):
        return Decision("deny", f"{name} is not in the profile's allowed_tools")
    if caller.run_allowlist is not None and name not in caller.run_allowlist:
        return Decision("deny", f"{name} is not in this run's allowlist")
    return None


def decide(meta: ToolMeta, risk: Risk, caller: Caller, profile: Profile,
           tainted: bool = False) -> Decision:
    """The decision for one call whose invocation risk is `risk`.

    The risk is never taken below the tool's floor (`meta.risk`, settled by ToolMeta), and an
    unknown value counts as high: the pure policy does not trust its caller to have applied
    `risk_of` first. `tainted`: the turn has read untrusted content; an egress call is then at
    least medium and never auto-approved, since the content may be steering the model to send
    data away.
    """
    denied = access(meta, caller, profile)
    if denied is not None:
        return denied
    risk = max_risk(risk if risk in RISKS else "high", meta.risk)
    taint = tainted and meta.egress is True
    if taint or meta.discloses:
        risk = max_risk(risk, "medium")
    base = MATRIX[(risk, caller.autonomy)]
    where = f"{risk} risk at {caller.autonomy} autonomy" + (f" ({TAINT_REASON})" if taint else "")
    if base == "deny":
        return Decision("deny", f"{meta.name}: {where} is not allowed")
    previewable = not meta.has_side_effects or meta.supports_dry_run
    if meta.name in profile.always_ask:
        return Decision("ask", f"{meta.name} is in the profile's always_ask")
    if meta.discloses:
        return Decision("ask", f"{where} needs approval: {DISCLOSURE_REASON}")
    if base == "ask":
        auto = meta.name in profile.auto_approve or meta.name in caller.session_auto_approve
        if auto and previewable and not taint:
            return Decision("allow", f"{meta.name} is auto-approved ({where})")
        return Decision("ask", f"{where} needs approval")
    return Decision("allow", where)


def could_ever_run(meta: ToolMeta, caller: Caller, profile: Profile) -> Decision:
    """Whether some invocation could run (now or after approval): the catalog filter.

    `meta.risk` is the least risk a tool can have; `risk_for(args)` may only raise it.
    """
    return decide(meta, meta.risk, caller, profile)


def max_risk(*risks: str) -> Risk:
    return max((r for r in risks if r in RISKS), key=RISKS.index, default="high")  # type: ignore[return-value]


def highest_level(levels: Collection[str]) -> Level | None:
    ranked = [Level(lvl) for lvl in levels if lvl in LEVELS]
    return max(ranked) if ranked else None
