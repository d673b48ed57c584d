"""The shell sandbox is the boundary, whatever the risk classifier says.

Each attack runs twice: through the sandbox runner directly (no classifier at all) and through
shell_run's execute (commands the classifier calls "read-only", medium). Either way a command sees
only the caller's workspace: no file outside it, no other process's environment, no network, a
private /tmp, and it dies with its parent and within its resource limits.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bot.core.tool import CallContext, ToolPermissionError
from tests.conftest import make_config
from tests.support.process_tree import all_gone, descendants
from tools import _bwrap, _pidcap, shell_run
from tools._bwrap import Limits, SandboxFinder
from tools._shell_risk import classify

SECRET = "s3cret-canary-7f1c"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def ctx(tmp_path: Path) -> CallContext:
    config = make_config(tmp_path)
    return CallContext(workspace=config.workspace, settings=config)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A secret beside the workspace, where every earlier escape pointed."""
    path = tmp_path / "outside-secret.txt"
    path.write_text(SECRET + "\n")
    return path


async def direct(command: str, workspace: Path, *, network: bool = False,
                 limits: Limits = Limits(), timeout: float = 30) -> dict:
    """The sandbox runner alone: no classifier, no approval, no tool."""
    sandbox = await _bwrap.probe()
    return await sandbox.run(command, workspace, {"LANG": "C"}, network=network, limits=limits,
                             timeout=timeout, cap=100_000, stop=asyncio.Event())


async def through_tool(ctx: CallContext, command: str, **args) -> dict:
    return await shell_run.build(ctx.settings).execute(ctx, command=command, **args)


def exists(path: Path | str) -> bool:
    return Path(path).exists()


def leaked(result: dict) -> bool:
    return SECRET in result["stdout"] or SECRET in result["stderr"]


# --- files outside the workspace -----------------------------------------------------------------


READ_ONLY_ESCAPES = [
    # (setup in the workspace, command): every command here is "read-only" (medium) to the classifier
    ({"list": "{outside}\0"}, "sort --files0-from=list"),
    ({"list": "{outside}\0"}, "wc --files0-from=list"),
    ({"list": "{outside}\0"}, "du --files0-from=list"),
    ({"link": "->{outside}"}, "cat link"),
    ({"dir/x": "", "dir/up": "->{outside_dir}"}, "grep -R canary dir"),
    ({"link": "->{outside_dir}"}, "find -L link -name outside-secret.txt -size -1k"),
]


@pytest.mark.parametrize(("files", "command"), READ_ONLY_ESCAPES)
async def test_a_read_only_command_cannot_read_a_file_outside_the_workspace(ctx, outside, files,
                                                                            command):
    for name, content in files.items():
        path = ctx.workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        content = content.format(outside=outside, outside_dir=outside.parent)
        if content.startswith("->"):
            path.symlink_to(content[2:])
        else:
            path.write_text(content)
    assert classify(command) == ("medium", "read-only command")
    via_tool = await through_tool(ctx, command)
    assert not leaked(via_tool)
    assert not leaked(await direct(command, ctx.workspace))
    if command.startswith("find"):  # find printed nothing because it saw nothing
        assert "outside-secret" not in via_tool["stdout"]


async def test_the_files0_from_example_reads_nothing_from_the_store_or_home(ctx, tmp_path,
                                                                          monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(SECRET)
    monkeypatch.setenv("HOME", str(home))
    store = ctx.settings.store_path
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(SECRET)
    names = [home / ".ssh" / "id_ed25519", store, Path("/proc/1/environ"),
             Path(f"/proc/{os.getpid()}/environ")]
    (ctx.workspace / "list").write_bytes(b"".join(str(n).encode() + b"\0" for n in names))
    result = await through_tool(ctx, "sort --files0-from=list")
    assert result["exit_code"] != 0 and not leaked(result)
    assert "No such file or directory" in result["stderr"]


@pytest.mark.parametrize("command", ["cat ../outside-secret.txt", "cat {outside}",
                                     "cd .. && cat outside-secret.txt",
                                     "ls -la .. ; cat ../*secret*"])
async def test_paths_that_leave_the_workspace_find_nothing(ctx, outside, command):
    command = command.format(outside=outside)
    assert not leaked(await direct(command, ctx.workspace))
    assert not leaked(await through_tool(ctx, command))


def make_repository(folder: Path) -> None:
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / "secret.txt").write_text(SECRET)
    subprocess.run(["git", "-C", str(folder), "add", "."], check=True)
    subprocess.run(["git", "-C", str(folder), "-c", "user.email=a@b", "-c", "user.name=a",
                    "commit", "-qm", SECRET], check=True)


async def test_a_git_file_pointing_at_a_repository_outside_is_not_followed(ctx, tmp_path):
    other = tmp_path / "other-repo"
    make_repository(other)
    (ctx.workspace / ".git").write_text(f"gitdir: {other}/.git\n")
    assert classify("git log -p") == ("medium", "read-only command")
    result = await through_tool(ctx, "git log -p")
    assert result["exit_code"] != 0 and not leaked(result)


async def test_nothing_outside_the_workspace_is_writable(ctx, tmp_path):
    result = await direct(f"touch {tmp_path}/escaped; echo x > /usr/escaped; echo x >> /etc/passwd;"
                          " echo done", ctx.workspace)
    assert result["stdout"] == "done\n"
    assert result["stderr"].count("Read-only file system") == 2
    # The workspace's parent inside is a private tmpfs: the touch landed there, and vanished.
    assert not exists(tmp_path / "escaped") and not exists("/usr/escaped")


async def test_etc_shows_only_the_allow_list(ctx):
    result = await direct("ls /etc; cat /etc/shadow", ctx.workspace)
    shown = set(result["stdout"].split())
    assert shown and shown <= set(_bwrap.ETC_ENTRIES)
    assert "passwd" in shown and "No such file" in result["stderr"]


# --- processes and their environments -------------------------------------------------------------


async def test_no_other_process_or_its_environment_is_visible(ctx, monkeypatch):
    monkeypatch.setenv("SERVICE_API_TOKEN", SECRET)  # scrubbed from the child's own environment
    command = (f"cat /proc/{os.getpid()}/environ /proc/{os.getppid()}/environ; "
               "cat /proc/*/environ; echo; ls /proc | grep -c '^[0-9]'")
    for result in (await direct(command, ctx.workspace), await through_tool(ctx, command)):
        assert not leaked(result)
        assert int(result["stdout"].split()[-1]) <= 4  # init, sh, cat/ls and grep: nobody else


async def test_the_environment_inside_names_no_host_paths(ctx, monkeypatch):
    monkeypatch.setenv("SERVICE_API_TOKEN", SECRET)
    result = await through_tool(ctx, "env")
    variables = dict(line.split("=", 1) for line in result["stdout"].splitlines() if "=" in line)
    assert (variables["HOME"], variables["TMPDIR"]) == ("/tmp", "/tmp")
    assert variables["PATH"] == _bwrap.SYSTEM_PATH
    assert "SERVICE_API_TOKEN" not in variables and not leaked(result)


async def test_tmp_is_private_in_both_directions(ctx):
    with tempfile.NamedTemporaryFile("w", dir="/tmp", prefix="host-", suffix=".txt") as host_file:
        host_file.write(SECRET)
        host_file.flush()
        name = os.path.basename(host_file.name)
        result = await direct(f"cat /tmp/{name}; echo left > /tmp/from-sandbox-{name}; ls /tmp",
                              ctx.workspace)
        assert not leaked(result) and "No such file" in result["stderr"]
        assert name not in result["stdout"].split()
        assert not exists(f"/tmp/from-sandbox-{name}")


async def test_the_sandbox_dies_with_the_process_that_started_it(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.mkfifo(workspace / "ready")
    starter = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from tools import _bwrap\n"
        "async def main():\n"
        "    sandbox = await _bwrap.probe()\n"
        "    await sandbox.run('trap \"\" TERM HUP; sleep 300 & echo go > ready; wait',\n"
        "                      Path(sys.argv[1]), {}, network=False, limits=_bwrap.Limits(),\n"
        "                      timeout=300, cap=1000, stop=asyncio.Event())\n"
        "asyncio.run(main())\n")
    bot = await asyncio.create_subprocess_exec(sys.executable, "-c", starter, str(workspace),
                                               cwd=REPO)
    try:
        await asyncio.wait_for(asyncio.to_thread((workspace / "ready").read_text), 20)
        tree = descendants(bot.pid)
        assert len(tree) >= 3  # bwrap, the namespace's init, sh, sleep
        os.kill(bot.pid, signal.SIGKILL)  # no cleanup code of ours runs
        assert await all_gone(tree)
    finally:
        if bot.returncode is None:
            bot.kill()
        await bot.wait()


# --- network --------------------------------------------------------------------------------------


async def connections_to_a_local_listener(workspace: Path, network: bool,
                                          via: CallContext | None = None) -> tuple[int, dict]:
    """How many connections a sandboxed command made to a listener on this machine's 127.0.0.1."""
    accepted = []

    async def on_connect(reader, writer):
        accepted.append(1)
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    command = f"bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' && echo connected"
    async with server:
        if via is None:
            result = await direct(command, workspace, network=network)
        else:
            result = await through_tool(via, command, network=network)
    return len(accepted), result


async def test_there_is_no_network_unless_the_call_asks_for_it(ctx):
    count, result = await connections_to_a_local_listener(ctx.workspace, network=False)
    assert (count, result["stdout"]) == (0, "")
    count, result = await connections_to_a_local_listener(ctx.workspace, network=False, via=ctx)
    assert (count, result["stdout"]) == (0, "")
    count, result = await connections_to_a_local_listener(ctx.workspace, network=True, via=ctx)
    assert (count, result["stdout"]) == (1, "connected\n")  # the control: the test can tell


def test_asking_for_network_makes_any_command_high_risk():
    tool = shell_run.build()
    assert tool.risk_for({"command": "ls"}) == "medium"
    assert tool.risk_for({"command": "ls", "network": True}) == "high"
    assert tool.assess("ls", network=True) == ("high", shell_run.NETWORK_REASON)


async def test_the_approval_says_when_a_call_has_network(ctx):
    preview = await shell_run.build().dry_run(ctx, command="ls", network=True)
    assert preview["summary"] == (f"Run `ls` in {ctx.workspace}, with network "
                                  f"(high: {shell_run.NETWORK_REASON})")


# --- resource limits ------------------------------------------------------------------------------


async def test_a_memory_hog_is_stopped_by_the_address_space_limit(ctx):
    hog = "x=aaaaaaaa; while :; do x=$x$x; done"
    result = await direct(hog, ctx.workspace, limits=Limits(memory_bytes=64 << 20), timeout=60)
    assert result["timed_out"] is False and result["exit_code"] != 0


async def test_a_busy_loop_is_stopped_by_the_cpu_limit(ctx):
    result = await direct("while :; do :; done", ctx.workspace, limits=Limits(cpu_seconds=1),
                          timeout=60)
    assert result["timed_out"] is False
    # Soft and hard limit are equal: SIGXCPU and SIGKILL arrive together (bwrap passes it on).
    assert result["exit_code"] in (128 + signal.SIGXCPU, 128 + signal.SIGKILL)


async def test_a_file_cannot_grow_past_the_file_size_limit(ctx):
    result = await direct("head -c 3000000 /dev/zero > big", ctx.workspace,
                          limits=Limits(file_bytes=1 << 20))
    assert result["exit_code"] != 0
    assert (ctx.workspace / "big").stat().st_size == 1 << 20


async def test_a_process_flood_stops_at_the_process_limit(ctx):
    sandbox = await _bwrap.probe()
    # Each started process is counted in a file by builtins only (no fork needed); the shell
    # gives up ("Cannot fork") once the cap is reached.
    flood = "n=0; while [ $n -lt 80 ]; do sleep 30 & n=$((n+1)); echo $n > started; done"
    result = await direct(flood, ctx.workspace, limits=Limits(processes=24))
    assert result["timed_out"] is False
    running = int((ctx.workspace / "started").read_text())
    if sandbox.caps_processes:  # an ordinary user (RLIMIT_NPROC), or root with a pids cgroup
        assert running <= 24
        if sandbox.pids is not None:  # and the command's cgroup is gone with it
            assert not list(sandbox.pids.base.glob(f"{_pidcap.PREFIX}{os.getpid()}-*"))
    else:  # root without a cgroup: the limit cannot hold, and doctor says so
        assert running > 24
        assert any(f.key == "tools.shell_run.max_processes"
                   for f in shell_run.build().environment_report()[1])


async def test_the_configured_limits_reach_the_command(ctx, tmp_path):
    config = make_config(tmp_path, {"tools": {"shell_run": {
        "cpu_seconds": 7, "memory_mb": 300, "max_file_mb": 5, "max_processes": 40}}})
    tool_ctx = CallContext(workspace=config.workspace, settings=config)
    result = await through_tool(tool_ctx, "ulimit -t; ulimit -v; ulimit -f; ulimit -p")
    assert result["stdout"].split() == ["7", str(300 * 1024), str(5 * 2048), "40"]


# --- where bubblewrap cannot run ------------------------------------------------------------------


def fake_bin(tmp_path: Path, **programs: str) -> str:
    """A directory of stand-in programs (shell scripts), as a search path."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name, script in programs.items():
        (folder / name).write_text(f"#!/bin/sh\n{script}\n")
        (folder / name).chmod(0o755)
    return str(folder)


async def test_without_bubblewrap_every_command_is_refused_with_the_fix(ctx, tmp_path):
    tool = shell_run.ShellRun(str(ctx.workspace), SandboxFinder(fake_bin(tmp_path, prlimit="")))
    with pytest.raises(ToolPermissionError) as refused:
        await tool.execute(ctx, command="echo hello > made.txt")
    assert "bubblewrap (bwrap) is not installed" in str(refused.value)
    assert "apt-get install bubblewrap" in str(refused.value)
    assert "doctor --security" in refused.value.llm_hint
    assert not (ctx.workspace / "made.txt").exists()
    summary, findings = tool.environment_report()
    assert summary == "" and [f.key for f in findings] == ["tools.shell_run"]
    assert "refuses every command" in findings[0].problem and "bubblewrap" in findings[0].fix


async def test_a_bubblewrap_that_cannot_create_namespaces_refuses_too(ctx, tmp_path):
    search = fake_bin(tmp_path, prlimit='shift 5; exec "$@"',
                      bwrap="echo 'bwrap: No permissions to create new namespace' >&2; exit 1")
    tool = shell_run.ShellRun(str(ctx.workspace), SandboxFinder(search))
    with pytest.raises(ToolPermissionError) as refused:
        await tool.execute(ctx, command="ls")
    assert "No permissions to create new namespace" in str(refused.value)
    assert "deploy/README.md" in str(refused.value)


async def test_doctor_reports_a_working_sandbox(tmp_path):
    from bot.ops.cli.doctor import environment_checks

    checks = environment_checks(make_config(tmp_path))
    ok = [c for c in checks if c.name == "shell_run environment"]
    assert ok and ok[0].status == "ok" and "bubblewrap works" in ok[0].detail
    root = [c for c in checks if c.name.endswith("tools.shell_run.max_processes")]
    assert bool(root) == (not (await _bwrap.probe()).caps_processes)


async def test_where_a_fresh_proc_is_refused_the_sandbox_gets_an_empty_one_never_the_hosts(
        ctx, tmp_path, monkeypatch):
    # A bwrap that behaves like one in a container with masked /proc paths.
    search = fake_bin(tmp_path, prlimit='shift 5; exec "$@"', bwrap=(
        'for a in "$@"; do [ "$a" = --proc ] && { echo "bwrap: Can\'t mount proc on '
        '/newroot/proc: Operation not permitted" >&2; exit 1; }; done; exec /usr/bin/bwrap "$@"'))
    monkeypatch.setenv("SERVICE_API_TOKEN", SECRET)
    tool = shell_run.ShellRun(str(ctx.workspace), SandboxFinder(search))
    result = await tool.execute(ctx, command=f"ls /proc; cat /proc/{os.getpid()}/environ; echo ran")
    assert result["stdout"] == "ran\n" and not leaked(result)
    summary, findings = tool.environment_report()
    assert "bubblewrap works" in summary
    assert any("empty /proc" in f.problem for f in findings)
