"""deploy/: `docker build` cannot run here, so the Dockerfile and compose file are parsed for the
properties that matter, the Dockerfile's install step is replayed on exactly the files it copies,
and the systemd unit goes through `systemd-analyze verify` (or, where systemd is absent, a parser
check of the same directives). The example config must load and document every key.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

from bot.config import settings as config_mod
from bot.config.schema import SCHEMA
from bot.ops.security_audit import audit
from tests.support.yaml_subset import parse_yaml_subset

ROOT = Path(__file__).parent.parent
DEPLOY = ROOT / "deploy"
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


# --- parsers ------------------------------------------------------------------------------------


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    instructions, buffer = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        instruction, _, args = (buffer + line).partition(" ")
        instructions.append((instruction.upper(), args.strip()))
        buffer = ""
    return instructions


def unit_directives(text: str) -> dict[str, dict[str, list[str]]]:
    """section -> key -> every value given (systemd allows a key to repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None and "=" in line, f"not a unit directive: {line}"
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return dockerfile_instructions((DEPLOY / "Dockerfile").read_text(encoding="utf-8"))


def instructions_named(dockerfile: list[tuple[str, str]], name: str) -> list[str]:
    return [args for instruction, args in dockerfile if instruction == name]


def env_assignments(dockerfile: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for args in instructions_named(dockerfile, "ENV"):
        for word in shlex.split(args):
            key, _, value = word.partition("=")
            env[key] = value
    return env


def copy_sources(dockerfile: list[tuple[str, str]]) -> list[tuple[list[str], str]]:
    copies = []
    for args in instructions_named(dockerfile, "COPY"):
        words = [w for w in shlex.split(args) if not w.startswith("--")]
        copies.append((words[:-1], words[-1]))
    return copies


# --- Dockerfile ---------------------------------------------------------------------------------


def test_the_image_builds_on_a_slim_python_base(dockerfile):
    bases = instructions_named(dockerfile, "FROM")
    assert bases and re.fullmatch(r"python:3\.1[1-9][\d.]*-slim(\S*)?", bases[-1].split()[0])


def test_the_process_runs_as_a_non_root_user_set_before_cmd(dockerfile):
    names = [instruction for instruction, _ in dockerfile]
    users = [i for i, name in enumerate(names) if name == "USER"]
    assert users, "no USER instruction: the bot would run as root"
    last_user = dockerfile[users[-1]][1].split(":")[0]
    assert last_user not in ("root", "0")
    assert users[-1] < names.index("CMD")
    assert names.count("CMD") == 1


def test_the_image_runs_myclaw_run_in_exec_form(dockerfile):
    (cmd,) = instructions_named(dockerfile, "CMD")
    assert shlex.split(cmd.replace(",", " ").strip("[]")) == ["myclaw", "run"]


def test_no_secret_is_baked_into_the_image(dockerfile):
    env = env_assignments(dockerfile)
    args = [a.split("=")[0] for a in instructions_named(dockerfile, "ARG")]
    assert not [name for name in [*env, *args] if SECRET_NAME.search(name)]
    assert not set(config_mod.SECRET_ENV_VARS) & set(env)


def test_state_and_config_live_on_the_data_volume(dockerfile, monkeypatch):
    volumes = " ".join(instructions_named(dockerfile, "VOLUME"))
    assert "/data" in re.findall(r"/[\w/.-]+", volumes)
    env = env_assignments(dockerfile)
    assert env["XDG_DATA_HOME"] == "/data" and env["HOME"] == "/data"
    assert env["MYCLAW_CONFIG"] == "/data/myclaw.toml"
    # The seeded config, read with the image's environment, keeps everything under /data and
    # the store outside the workspace.
    monkeypatch.setenv("HOME", env["HOME"])
    config = config_mod.load(str(DEPLOY / "myclaw.example.toml"), env=env)
    assert config.store_path == Path("/data/myclaw/myclaw.db")
    assert config.workspace == Path("/data/myclaw-workspace")
    assert not config.store_path.is_relative_to(config.workspace)
    assert [f for f in audit(config) if f.key != "permissions.config"] == []


def test_the_seeded_config_is_private_and_owned_by_the_service_user(dockerfile):
    copies = copy_sources(dockerfile)
    assert (["deploy/myclaw.example.toml"], "/data/myclaw.toml") in copies
    runs = " ".join(instructions_named(dockerfile, "RUN"))
    assert "chmod 600 /data/myclaw.toml" in runs
    assert re.search(r"chown -R myclaw:myclaw /data\b", runs)


def test_the_healthcheck_probes_healthz_where_the_seeded_config_serves_it(dockerfile):
    (check,) = instructions_named(dockerfile, "HEALTHCHECK")
    url = re.search(r"http://([\d.]+):(\d+)/healthz", check)
    assert url, check
    health = tomllib.loads((DEPLOY / "myclaw.example.toml").read_text(encoding="utf-8"))["health"]
    assert health["enabled"] is True
    assert (health["listen"], health["port"]) == (url.group(1), int(url.group(2)))
    assert re.search(r"--interval=\d+s", check) and "CMD" in check


def test_the_install_step_is_the_makefiles_pip_install_with_the_postgres_extra(dockerfile):
    runs = instructions_named(dockerfile, "RUN")
    assert any(re.search(r"\bpip install \"\.\[postgres\]\"(\s|$)", run) for run in runs)
    assert re.search(r"pip install -q -e '?\.", (ROOT / "Makefile").read_text(encoding="utf-8"))


def test_the_copied_files_are_enough_to_build_the_package(dockerfile, tmp_path):
    """Replay the image's COPY steps into a build dir, then let setuptools read the project."""
    build = tmp_path / "build"
    build.mkdir()
    for sources, destination in copy_sources(dockerfile):
        if not destination.startswith("/"):  # relative to WORKDIR /build: the install sources
            for source in sources:
                origin = ROOT / source
                assert origin.exists(), f"the Dockerfile copies {source}, which does not exist"
                target = build / destination / Path(source).name if destination.endswith("/") \
                    else build / destination
                if origin.is_dir():
                    shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy2(origin, target)
    egg = tmp_path / "egg"
    egg.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", "-q", "egg_info",
         "--egg-base", str(egg)],
        cwd=build, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "cannot be found" not in result.stderr, result.stderr  # e.g. the readme
    assert "deprecated" not in result.stderr, result.stderr  # e.g. a licence table, not SPDX
    (info,) = egg.glob("*.egg-info")
    assert "myclaw = bot.ops.cli:main" in (info / "entry_points.txt").read_text()
    assert set((info / "top_level.txt").read_text().split()) >= {"bot", "channels", "tools"}
    assert "bot/ops/cli/main.py" in (info / "SOURCES.txt").read_text()
    # The image's `pip install .`, offline: installed into a directory of its own (the
    # dependencies are this test run's), then the installed copy answers `myclaw --help`.
    target = tmp_path / "installed"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(build)],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (target / "bot" / "ops" / "cli" / "main.py").is_file()
    assert (target / "tools" / "shell_run.py").is_file()
    check = subprocess.run([sys.executable, "-c",
                            "import bot.ops.cli, sys; sys.exit(bot.ops.cli.main(['--help']))"],
                           cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
                           capture_output=True, text=True, timeout=60, check=False)
    assert check.returncode == 0 and "usage: myclaw" in check.stdout, check.stderr[-2000:]
    assert str(target) in subprocess.run(
        [sys.executable, "-c", "import bot; print(bot.__file__)"], cwd=tmp_path,
        env={"PYTHONPATH": str(target)}, capture_output=True, text=True, timeout=60).stdout


def test_the_build_context_lets_in_only_the_sources_and_keeps_secrets_out(dockerfile):
    rules = [line.strip() for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert rules[0] == "*"
    allowed = {rule[1:].rstrip("/") for rule in rules if rule.startswith("!")}
    for sources, _ in copy_sources(dockerfile):
        assert set(sources) <= allowed, f"{sources} would be excluded from the build context"
    assert not [a for a in allowed if "env" in a or a.endswith(".db") or a.startswith(".")]


# --- compose ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return parse_yaml_subset((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))


def default_service(compose: dict[str, Any]) -> dict[str, Any]:
    """The one service `docker compose up` starts (the others belong to a profile)."""
    (service,) = [s for s in compose["services"].values() if "profiles" not in s]
    return service


def replicas_profile(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in compose["services"].items()
            if "replicas" in (s.get("profiles") or [])}


def test_compose_restarts_the_bot_and_reads_secrets_from_an_env_file(compose):
    service = default_service(compose)
    assert service["restart"] == "unless-stopped"
    assert service["env_file"] == ["myclaw.env"]
    assert "environment" not in service  # secrets never written into the compose file
    assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert (DEPLOY / ".." / service["build"]["dockerfile"]).resolve() == DEPLOY / "Dockerfile"


def test_every_secrets_file_compose_reads_is_git_ignored_and_its_example_is_not(compose):
    names = {name for service in compose["services"].values() for name in service.get("env_file", [])}
    assert {"myclaw.env", "postgres.env", "proxy.env"} <= names
    for name in names:
        ignored = subprocess.run(["git", "check-ignore", "-q", f"deploy/{name}"], cwd=ROOT)
        assert ignored.returncode == 0, f"deploy/{name} holds secrets but git would offer it"
        example = subprocess.run(["git", "check-ignore", "-q", f"deploy/{name}.example"], cwd=ROOT)
        assert example.returncode == 1 and (DEPLOY / f"{name}.example").exists()


def test_compose_keeps_state_on_a_named_volume_at_data(compose):
    service = default_service(compose)
    volume, _, mount = service["volumes"][0].partition(":")
    assert mount == "/data"
    assert volume in compose["volumes"]


def test_compose_hardens_the_container(compose):
    service = default_service(compose)
    assert service["read_only"] == "true" and service["init"] == "true"
    assert service["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in service["security_opt"]


def test_the_replicas_profile_is_postgres_two_replicas_and_a_proxy_in_front_of_the_webhook(compose):
    profile = replicas_profile(compose)
    assert set(profile) == {"postgres", "replica-1", "replica-2", "proxy"}
    port = config_mod.DEFAULTS["telegram"]["port"]
    command = " ".join(profile["proxy"]["command"])
    for name in ("replica-1", "replica-2"):
        replica = profile[name]
        assert f"--to {name}:{port}" in command
        assert replica["env_file"] == ["myclaw.env"] and "ports" not in replica
        assert replica["depends_on"] == {"postgres": {"condition": "service_healthy"}}
        assert replica["read_only"] == "true" and replica["cap_drop"] == ["ALL"]
        assert "no-new-privileges:true" in replica["security_opt"]
        assert replica["volumes"] == ["myclaw-shared:/data"]
    published = [name for name, s in compose["services"].items() if "ports" in s]
    assert published == ["proxy"]
    assert not [name for name, s in compose["services"].items() if "environment" in s]


def test_the_replicas_env_templates_hold_no_secret_value():
    for name in ("postgres.env.example", "proxy.env.example"):
        lines = [line for line in (DEPLOY / name).read_text().splitlines()
                 if line and not line.startswith("#")]
        assignments = dict(line.split("=", 1) for line in lines)
        assert all(not value for key, value in assignments.items() if SECRET_NAME.search(key))
    assert "POSTGRES_PASSWORD" in (DEPLOY / "postgres.env.example").read_text()


def test_the_env_file_template_names_every_secret_and_holds_no_value():
    lines = [line for line in (DEPLOY / "myclaw.env.example").read_text().splitlines()
             if line and not line.startswith("#")]
    assignments = dict(line.split("=", 1) for line in lines)
    assert set(assignments) == set(config_mod.SECRET_ENV_VARS)
    assert set(assignments.values()) == {""}


def test_the_yaml_subset_parser_reads_nesting_lists_and_comments():
    parsed = parse_yaml_subset('a:\n  b: "x: y"  # note\n  c:\n    - 1\n    - "two"\nd:\n')
    assert parsed == {"a": {"b": "x: y", "c": ["1", "two"]}, "d": None}


# --- systemd --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def unit() -> dict[str, dict[str, list[str]]]:
    return unit_directives((DEPLOY / "myclaw.service").read_text(encoding="utf-8"))


REQUIRED_HARDENING = {
    "NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
    "Restart": "on-failure", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes", "RestrictSUIDSGID": "yes", "LockPersonality": "yes",
    "CapabilityBoundingSet": "", "AmbientCapabilities": "", "PrivateDevices": "yes",
    "RestrictNamespaces": "cgroup ipc mnt net pid user uts",  # the shell sandbox's namespaces
    "UMask": "0077",
}


def test_the_unit_carries_the_hardening_directives(unit):
    service = unit["Service"]
    for key, value in REQUIRED_HARDENING.items():
        assert service.get(key) == [value], f"{key}: {service.get(key)}"
    assert service["ProtectHome"][0] in ("yes", "read-only", "tmpfs")
    assert service["User"][0] not in ("root", "0") and service["Group"][0] not in ("root", "0")
    assert service["EnvironmentFile"] == ["/etc/myclaw/myclaw.env"]
    assert service["ExecStart"][0].endswith("myclaw run")


def test_the_unit_writes_only_to_the_data_dir_which_holds_store_and_workspace(unit, monkeypatch):
    service = unit["Service"]
    writable = [Path(p) for entry in service["ReadWritePaths"] for p in entry.split()]
    assert writable == [Path("/var/lib/myclaw")]
    env = dict(e.split("=", 1) for e in service["Environment"])
    monkeypatch.setenv("HOME", env["HOME"])
    config = config_mod.load(str(DEPLOY / "myclaw.example.toml"), env=env)
    assert any(config.store_path.is_relative_to(w) for w in writable)
    assert any(config.workspace.is_relative_to(w) for w in writable)
    # The config file is read-only to the service: the model cannot raise its own autonomy.
    assert not any(Path(env["MYCLAW_CONFIG"]).is_relative_to(w) for w in writable)
    assert [f for f in audit(config) if f.key != "permissions.config"] == []


def _fake_root(tmp_path: Path, unit_text: str) -> Path:
    """A root dir for `systemd-analyze --root`: the system's stock units, our unit, and a stand-in
    for the installed program (verify checks ExecStart is executable)."""
    root = tmp_path / "root"
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "etc/systemd/system/myclaw.service").write_text(unit_text)
    exec_start = unit_directives(unit_text)["Service"]["ExecStart"][0].split()[0]
    program = root / exec_start.lstrip("/")
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    return root


def _verify(analyze: str, root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [analyze, "verify", f"--root={root}", "/etc/systemd/system/myclaw.service"],
        capture_output=True, text=True, timeout=30, check=False)


def test_the_unit_passes_systemd_analyze_verify_or_the_directive_parser(tmp_path, unit):
    text = (DEPLOY / "myclaw.service").read_text(encoding="utf-8")
    analyze = shutil.which("systemd-analyze")
    if analyze is None or not Path("/usr/lib/systemd/system").is_dir():
        # No systemd here: every line must at least be a known-good directive of ours.
        known = {"Unit", "Service", "Install"}
        assert set(unit) == known
        assert unit["Install"]["WantedBy"] == ["multi-user.target"]
        assert unit["Service"]["Type"] == ["exec"]
        return
    result = _verify(analyze, _fake_root(tmp_path, text))
    assert result.returncode == 0 and result.stdout + result.stderr == "", result.stderr
    # The same check catches a bad value (systemd only warns about it), so it can fail.
    broken = _verify(analyze, _fake_root(tmp_path / "broken",
                                         text.replace("ProtectSystem=strict", "ProtectSystem=tight")))
    assert "ProtectSystem" in broken.stderr or "protect system" in broken.stderr.lower()
    exposure = subprocess.run(
        [analyze, "security", "--offline=yes", "--threshold=25", "--no-pager",
         f"--root={tmp_path / 'root'}", "/etc/systemd/system/myclaw.service"],
        capture_output=True, text=True, timeout=30, check=False)
    # Exposure score at most 2.5 ("OK"). It was 1.4 before shell_run's sandbox: systemd counts
    # the namespaces and mount calls bubblewrap needs (1.0), which buy each command a far
    # narrower view than the unit gives the bot.
    assert exposure.returncode == 0, exposure.stdout[-600:]


# --- the example config -------------------------------------------------------------------------


def schema_keys(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Every key the schema names that `value` (the parsed example) does not contain."""
    missing: list[str] = []
    if schema.get("type") != "object" or not isinstance(value, dict):
        return missing
    for key, sub in schema.get("properties", {}).items():
        where = f"{path}.{key}" if path else key
        if key not in value:
            missing.append(where)
        else:
            missing += schema_keys(sub, value[key], where)
    for pattern in schema.get("patternProperties", {}):
        if not any(re.search(pattern, k) for k in value):
            missing.append(f"{path}.<{pattern}>")
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and extra.get("type") == "object" and "properties" in extra:
        entries = [v for k, v in value.items() if k not in schema.get("properties", {})]
        if not entries:
            missing.append(f"{path}.<name>")
        union = {k: v for entry in entries for k, v in entry.items()}
        missing += schema_keys(extra, union, f"{path}.<name>")
    return missing


# `store.path` may only be shown commented out: its default ("" = under $XDG_DATA_HOME) is not a
# value the schema accepts (minLength 1), and any real path would stop being the default.
COMMENTED_OUT = {"store.path": r"^#\s*path\s*=\s*\"",
                 "profiles.<name>.model": r"^#\s*model\s*=\s*\"local\"",
                 "models.<name>": r"^#\s*\[models\.local\]",
                 **{f"models.<name>.{key}": rf"^#\s*{key}\s*=" for key in
                    ("provider", "model", "base_url", "api_key_env", "capabilities", "prices")}}


def test_the_example_config_loads_and_documents_every_key():
    text = (DEPLOY / "myclaw.example.toml").read_text(encoding="utf-8")
    config = config_mod.load(str(DEPLOY / "myclaw.example.toml"), env={"HOME": "/nonexistent"})
    assert config.source == DEPLOY / "myclaw.example.toml"
    missing = schema_keys(SCHEMA, tomllib.loads(text))
    for key, pattern in COMMENTED_OUT.items():
        assert re.search(pattern, text, re.MULTILINE), f"{key} is not documented"
        missing.remove(key)
    assert missing == []
    defaults_missing = schema_keys(
        {"type": "object", "properties": {k: _as_schema(v) for k, v in config_mod.DEFAULTS.items()}},
        tomllib.loads(text))
    assert set(defaults_missing) <= set(COMMENTED_OUT)


def _as_schema(value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and value:
        return {"type": "object", "properties": {k: _as_schema(v) for k, v in value.items()}}
    return {}


def test_every_key_line_of_the_example_config_has_a_comment():
    undocumented = []
    lines = (DEPLOY / "myclaw.example.toml").read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if "=" in stripped and not stripped.startswith("#") and "#" not in stripped:
            preceded = number > 1 and lines[number - 2].strip().startswith("#")
            if not preceded:
                undocumented.append(f"{number}: {stripped}")
    assert undocumented == []


def test_the_stop_timeouts_leave_room_for_the_shutdown_grace_the_docs_state(compose, unit):
    grace = config_mod.DEFAULTS["agent"]["shutdown_grace_seconds"]
    readme = " ".join((DEPLOY / "README.md").read_text(encoding="utf-8").split())
    assert f"`[agent] shutdown_grace_seconds` ({grace} s by default)" in readme
    service = default_service(compose)
    assert service["stop_grace_period"] == "30s" and "`stop_grace_period: 30s`" in readme
    assert unit["Service"]["TimeoutStopSec"] == ["30s"] and "`TimeoutStopSec=30s`" in readme
    assert 30 > grace


def test_the_readmes_editable_install_builds_without_a_warning(tmp_path):
    """README's `.venv/bin/pip install -e '.[postgres]'`: setuptools takes the plain way (a .pth
    naming the checkout, as `package-dir` says) and has nothing to announce. Left to find the
    layout itself it installed a finder of its own and printed ten lines about it."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, project / name)
    for package in ("bot", "channels", "tools"):
        shutil.copytree(ROOT / package, project / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.mo"))
    built = tmp_path / "wheel"
    result = subprocess.run(
        [sys.executable, "-W", "default", "-c", "import sys; from setuptools import build_meta; "
         "print(build_meta.build_editable(sys.argv[1]))", str(built)],
        cwd=project, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Editable installation" not in result.stderr, result.stderr[-2000:]
    assert "Warning" not in result.stderr, result.stderr[-2000:]
    with zipfile.ZipFile(built / result.stdout.split()[-1]) as wheel:
        paths = [wheel.read(name).decode().strip() for name in wheel.namelist()
                 if name.endswith(".pth")]
    assert paths == [str(project.resolve())]
