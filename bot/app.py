"""The composition root: the one place that builds and wires everything from the configuration,
and the only module of the core that names channel or tool modules.

Nothing is done at import time. `build_tools` / `build_registry` are what `myclaw doctor`,
`myclaw tools` and the conformance suite use; `App.open` builds the whole process (store,
registry, LLM client, safety services, agent); `App.serve` starts the configured channels and
runs until SIGTERM/SIGINT; `App.chat_in_terminal` is the terminal conversation. Channel modules
(and so their platform libraries) are imported only when used (`channel_module`).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from bot.approvals.expiry import ExpirySweeper
from bot.config.settings import Config, model_names
from bot.core.approval_cards import ApprovalSurface
from bot.core.errors import ChannelError
from bot.core.identity import CONSOLE_OPERATOR, OPERATOR, Level, Sender
from bot.core.listeners import Listeners
from bot.core.policy import Profile
from bot.core.tool import Ports
from bot.runtime.heap import HeapTrim
from bot.runtime.services import Services
from bot.store.factory import make_store
from bot.toolbox import offload
from bot.toolbox.hooks import run_session_hooks
from bot.toolbox.registry import Registry

if TYPE_CHECKING:
    from bot.toolbox.custom_tools import LoadReport

log = logging.getLogger(__name__)

BUILTIN_TOOLS_PACKAGE = "tools"
CHANNEL_MODULES = {"telegram": "channels.telegram", "discord": "channels.discord",
                   "slack": "channels.slack", "whatsapp": "channels.whatsapp",
                   "cli": "channels.cli"}


def build_tools(config: Config, cwd: Path | str | None = None) -> tuple[Registry, LoadReport]:
    """Built-in tools from the `tools` package, then custom tool modules, and the custom
    loader's report (what loaded, which files failed and why: `myclaw doctor` shows it).

    Custom modules are looked up relative to `cwd` (default: the process's working directory).
    """
    from bot.toolbox.custom_tools import load_custom_tools

    registry = Registry(Profile.from_config(config.profile()))
    registry.discover(BUILTIN_TOOLS_PACKAGE, config)
    report = load_custom_tools(registry, config, Path.cwd() if cwd is None else Path(cwd))
    return registry, report


def build_registry(config: Config, cwd: Path | str | None = None) -> Registry:
    """The tool registry (see `build_tools`): what `myclaw tools` and the conformance suite use."""
    return build_tools(config, cwd)[0]


def build_services(config: Config, store: Any, registry: Registry,
                   clock: Callable[[], float] = time.time, llm_client: Any = None) -> Services:
    """Every long-lived part of one process, on an open store."""
    from bot.access.languages import Languages
    from bot.access.preferences import Preferences
    from bot.access.ratelimit import rate_limiter
    from bot.access.senders import Senders
    from bot.approvals.grants import Grants
    from bot.approvals.receipts import Receipts, receipt_key
    from bot.approvals.service import Approvals
    from bot.approvals.undo import UndoLog
    from bot.config.prices import PriceTable
    from bot.conversation.delivery import Delivery
    from bot.conversation.inbox import Inbox, InboxSettings, replica_name
    from bot.conversation.outbound import HeldMessages, SentMessages
    from bot.jobs.jobs import JobLimits, Jobs
    from bot.llm.client import LLMClient, audit_to
    from bot.llm.models import Models
    from bot.money.budgets import Budgets
    from bot.money.gate import PaidCalls
    from bot.money.spend import SpendLedger

    approvals_cfg = config["approvals"]
    models = Models(config)   # the aliases' prices count like [prices]
    spend = SpendLedger(store, PriceTable.from_config(config, models.price_tables()), clock)
    budgets = Budgets(config, spend)
    paid = PaidCalls(spend, budgets)   # the one gate every paid call goes through
    llm = LLMClient(config, client=llm_client, gate=paid, audit=audit_to(store), models=models)
    replica = replica_name(config["inbox"]["replica"], store.dialect, config.env)
    jobs = Jobs(store, JobLimits.from_config(config["jobs"]), clock, replica)
    preferences = Preferences(store)
    return Services(
        config=config, store=store, registry=registry, llm=llm, spend=spend, budgets=budgets,
        paid=paid,
        rate_limits=rate_limiter(config, store),
        approvals=Approvals(store, timeout_seconds=approvals_cfg["timeout_seconds"],
                            approvers=approvers(config), clock=clock,
                            grants=Grants(store, approvals_cfg["grant_ttl_seconds"], clock),
                            requester_only=[t.meta.name for t in registry.list_all()
                                            if t.meta.discloses]),
        receipts=Receipts(store, receipt_key(config)),
        undo=UndoLog(store),
        senders=Senders(config, store),
        preferences=preferences,
        jobs=jobs,
        delivery=Delivery(),
        inbox=Inbox(store, replica, InboxSettings.from_config(config["inbox"]), clock),
        held=HeldMessages(store, clock),
        sent=SentMessages(store, clock),
        ports=tool_ports(config, store, registry, llm, jobs, preferences),
        languages=Languages(preferences, config["agent"]["language"],
                            config["agent"]["timezone"]),
    )


def tool_ports(config: Config, store: Any, registry: Registry, llm: Any, jobs: Any,
               preferences: Any) -> Ports:
    """What tools reach besides their args: memory, the metered model, quotas and jobs."""
    from bot.conversation.memory import Memories
    from bot.jobs.planner import JobPlanner
    from bot.llm.consult import MeteredModel
    from bot.money.quota import ToolQuota

    def catalog(sender: Sender, level: Level) -> set[str]:
        return {tool.meta.name for tool in registry.list_for_sender(str(sender), level)}

    return Ports(memory=Memories(store), model=MeteredModel(llm), quota=ToolQuota(store),
                 jobs=JobPlanner(jobs, preferences, catalog, config["agent"]["timezone"],
                                 job_models(config)))


def job_models(config: Config) -> set[str]:
    """The models a job may name: every alias, and every model id the config names."""
    return set(config["models"]) | {name for _, name in model_names(config)}


def approvers(config: Config) -> list[str]:
    """Who may answer anyone's approval requests: the configured approvers, and the operator's
    web console when it is enabled (its sessions need a login link only the operator can make)."""
    names = list(config["approvals"]["approvers"])
    if config["console"]["enabled"]:
        names.append(str(CONSOLE_OPERATOR))
    return names


class Stoppable(Protocol):
    """A long-lived part the app stops at shutdown, in reverse order of starting."""

    async def stop(self) -> None: ...


# Starts one operator surface for a built app: (name, part with start/stop), or None when off.
Surface = Callable[["App"], Awaitable[tuple[str, Any] | None]]


class App:
    def __init__(self, config: Config, services: Services, surfaces: Sequence[Surface] = ()):
        from bot.runtime.agent import Agent

        self.config = config
        self.services = services
        self.agent = Agent(services)
        self.expiry = ExpirySweeper(self.agent, min(15.0, config["approvals"]["timeout_seconds"] / 4))
        self.channels: dict[str, Any] = {}
        self._extras: list[Stoppable] = []  # other long-lived parts (MCP, health, console…)
        self._surfaces = tuple(surfaces)       # the operator's surfaces, started with the services
        self.parts: dict[str, Any] = {}        # the started surfaces by name ("console", …)
        # One HTTP server per address and port: webhooks and /healthz naming the same share it.
        self.listeners = Listeners()
        self._closed = False
        self._started = False

    @classmethod
    async def open(cls, config: Config, clock: Callable[[], float] = time.time,
                   surfaces: Sequence[Surface] = ()) -> App:
        from bot.access.workspace_scope import create_workspace, require_dedicated_workspace

        require_dedicated_workspace(config)
        create_workspace(config)
        store = await make_store(config).open()
        try:
            services = build_services(config, store, build_registry(config), clock)
            await services.languages.load()
            return cls(config, services, surfaces)
        except BaseException:   # e.g. an unreadable receipt key: nothing may keep the store open
            await store.close()
            raise

    @property
    def console(self) -> Any:
        """The web console, once started (None when not enabled or not handed in)."""
        return self.parts.get("console")

    def system_context(self) -> Any:
        """The call context for process-level hooks (not tied to any sender's session)."""
        return self.services.call_context(sender=OPERATOR, level=Level.FULL, session_id="",
                                          chat="", workspace=self.config.workspace)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self.agent.queue.drain(timeout=5)
        if self._started:
            await run_session_hooks(self.services.registry, "shutdown", self.system_context())
        for part in reversed(self._extras):
            await part.stop()
        await self.listeners.close()
        await self.services.llm.close()
        await self.services.store.close()
        offload.shutdown()  # the CPU workers (diffs, page parsing) end with the bot

    async def recover(self) -> int:
        """Take up the turns a previous process of this replica left unfinished (see
        bot.runtime.recovery), now: the channels must already be registered for delivery."""
        ready = asyncio.Event()
        ready.set()
        return await self.agent.recovery.queue(ready)

    # --- channels ------------------------------------------------------------------------

    def configured_channels(self) -> list[str]:
        names = []
        if self.config.telegram_enabled:
            names.append("telegram")
        if self.config.discord_enabled:
            names.append("discord")
        if self.config.slack_enabled:
            names.append("slack")
        if self.config.whatsapp_enabled:
            names.append("whatsapp")
        return names

    async def start_channels(self, names: list[str]) -> None:
        for name in names:
            module = channel_module(name)
            for lock, taken in module.exclusive_locks(self.config).items():
                if not await self.services.store.hold(lock):
                    raise ChannelError(taken)
            channel = module.create(self.config, self.agent, self.listeners)
            await channel.start()
            self.channels[name] = channel
            if isinstance(channel, ApprovalSurface):  # approvals answered in the console show there
                self.agent.add_approval_surface(name, channel)
            self.connected(name, channel)
            log.info("%s channel connected", name)

    async def stop_channels(self) -> None:
        for name, channel in reversed(list(self.channels.items())):
            self.services.delivery.unregister(name)
            try:
                await channel.stop()
            except ChannelError as exc:
                log.warning("%s channel did not stop cleanly: %s", name, exc)
        self.channels.clear()

    async def start_services(self) -> None:
        """The long-lived parts besides channels: MCP servers, the /healthz endpoint."""
        if self.config["mcp"]["servers"]:
            from bot.toolbox.mcp.client import MCPManager

            manager = MCPManager(self.config, self.services.registry)
            await manager.start()
            self._extras.append(manager)
        for surface in self._surfaces:
            started = await surface(self)
            if started is not None:
                name, part = started
                self.parts[name] = part
                self._extras.append(part)
        self._extras.append(self.expiry)
        await self.expiry.start()
        self._started = True
        await run_session_hooks(self.services.registry, "start", self.system_context())

    async def start_scheduler(self) -> None:
        """Scheduled jobs, once the channels are up: a run is delivered only through a channel
        connected in this process (one connecting later wakes the scheduler: `connected`)."""
        if not self.config["jobs"]["enabled"]:
            return
        from bot.jobs.runner import AgentJobRunner
        from bot.jobs.scheduler import Scheduler

        runner = AgentJobRunner(self.agent, self.services.delivery, self.services.senders)
        scheduler = Scheduler(self.services.jobs, runner, self.services.jobs.clock,
                              tick_seconds=self.config["jobs"]["tick_seconds"],
                              channels=runner.channels)
        await scheduler.start()
        self._extras.append(scheduler)

    def connected(self, name: str, outlet: Any) -> None:
        """A channel is up: it carries the core's messages; due jobs for it are looked at."""
        self.services.delivery.register(name, outlet)
        self.services.jobs.changed.set()

    async def chat_in_terminal(self, quiet_logs: bool) -> None:
        """The terminal conversation until Ctrl-D (the long-lived services run meanwhile);
        `quiet_logs`: log lines below ERROR stay out of the conversation."""
        await self.start_services()
        if quiet_logs:
            logging.getLogger().setLevel(logging.ERROR)
        log.info("myclaw ready (channels: terminal)")
        grace = self.config["agent"]["shutdown_grace_seconds"]
        terminal = channel_module("cli").create(self.config, self.agent)
        self.channels["cli"] = terminal   # health lists it with the platform channels
        self.connected("cli", terminal)
        if isinstance(terminal, ApprovalSurface):   # answered in the console: the question goes
            self.agent.add_approval_surface("cli", terminal)
        await self.recover()
        await self.start_scheduler()
        await self.expiry.sweep()
        try:
            await terminal.run()
            await self.agent.shutdown(grace)
        finally:
            self.channels.pop("cli", None)
            self.services.delivery.unregister("cli")

    async def serve(self, names: list[str]) -> None:
        """Start everything, wait for SIGTERM/SIGINT, then shut down gracefully: turns in
        flight finish (or are cancelled after `grace` seconds, their state recorded), then the
        channels close; `close()` closes the store. Pending approvals stay valid."""
        grace = self.config["agent"]["shutdown_grace_seconds"]
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        outlets_up = asyncio.Event()
        try:
            # Queued before anything can arrive, so a new message waits behind the turn its
            # sender was stranded in; run once the channels can carry the answers.
            await self.agent.recovery.queue(outlets_up)
            await self.start_services()
            await self.start_channels(names)
            outlets_up.set()
            await self.start_scheduler()
            await self.expiry.sweep()   # requests that lapsed while the bot was down
            log.info("myclaw ready (channels: %s)", ", ".join(names) or "none")
            gc.freeze()   # the channels' libraries, now up, join the frozen heap (bot.ops.process)
            trim = HeapTrim(lambda: self.agent.queue.idle)
            self.agent.queue.on_idle = trim.soon
            trim.after_start()
            await stop.wait()
            self.agent.queue.on_idle = None
            trim.cancel()
            log.info("shutting down: finishing the turns in flight")
            await self.agent.shutdown(grace)
        finally:
            if not outlets_up.is_set():
                self.agent.queue.cancel_all()   # recoveries never started: the next start has them
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            await self.stop_channels()


def channel_module(name: str,
                   import_module: Callable[[str], ModuleType] = importlib.import_module
                   ) -> ModuleType:
    """A channel's package, imported on demand (with its platform library): "telegram",
    "discord", "slack", "whatsapp" or "cli". An ImportError means the channel cannot be used here."""
    return import_module(CHANNEL_MODULES[name])
