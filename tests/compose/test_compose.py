"""docker-compose.yml without Docker: parse it, check its commands and addresses, run it locally.

Every service's command runs here as a process, with the compose environment, service names
(and their aliases) mapped to 127.0.0.1, ports mapped to free local ports, and the volumes
mapped to temporary directories.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlbridge.cli import build_parser

from ..clients.helpers import build_c, check_js, stop

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
AGENT_SERVICES = {"python": "agent", "c": "agent-c", "js": "agent-js"}
TCP = re.compile(r"tcp://([^:/]+):(\d+)")
VARIABLE = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")
#: Small runs for the tests; compose's own defaults are checked to parse as well.
TEST_VARIABLES = {"EPISODES": "3", "MAX_STEPS": "30", "SEED": "4"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def interpolate(value, variables: dict[str, str]):
    """Compose's ${NAME} and ${NAME:-default}, recursively through lists and maps."""
    if isinstance(value, str):
        return VARIABLE.sub(lambda m: variables.get(m.group(1)) or (m.group(2) or ""), value)
    if isinstance(value, list):
        return [interpolate(item, variables) for item in value]
    if isinstance(value, dict):
        return {key: interpolate(item, variables) for key, item in value.items()}
    return value


def services(compose: dict, variables: dict[str, str] | None = None) -> dict:
    return interpolate(compose["services"], variables or {})


def names_of(name: str, service: dict) -> set[str]:
    """The host names a service answers to: its own and its network aliases."""
    aliases = set()
    for network in (service.get("networks") or {}).values():
        aliases.update((network or {}).get("aliases", []))
    return {name, *aliases}


def bound_ports(command: list[str]) -> list[str]:
    return [
        TCP.match(command[i + 1]).group(2)
        for i, arg in enumerate(command)
        if arg == "--bind" and TCP.match(command[i + 1])
    ]


def test_the_services_and_the_volume(compose):
    found = compose["services"]
    for name in ("keys", "env", "experiment", *AGENT_SERVICES.values()):
        assert name in found, name
        assert "healthcheck" in found[name], f"{name} has no healthcheck"
    assert {"keys", "data"} <= set(compose["volumes"])
    assert "data:/data" in found["experiment"]["volumes"]
    assert "/data/" in " ".join(found["experiment"]["command"])  # the log goes to the volume
    # One setting swaps the agent: each language is a profile, and each answers as "agent".
    for profile, name in AGENT_SERVICES.items():
        assert found[name]["profiles"] == [profile]
        assert "agent" in names_of(name, found[name])
    assert (ROOT / ".env").read_text().count("COMPOSE_PROFILES=python") == 1


@pytest.mark.parametrize(
    "variables",
    [{}, TEST_VARIABLES, {"GAME": "blackjack", "AGENT": "first"}],
    ids=["defaults", "test-run", "blackjack"],
)
def test_every_rlbridge_command_parses(compose, variables):
    parser = build_parser()
    checked = 0
    for service in services(compose, variables).values():
        for command in (service["command"], service["healthcheck"]["test"][1:]):
            if command[0] == "rlbridge":
                parser.parse_args(command[1:])  # SystemExit (a failure) if it does not parse
                checked += 1
    assert checked >= 8


def test_addresses_and_ports_line_up(compose):
    found = services(compose)
    binders: dict[str, set[str]] = {}  # host name -> ports bound there
    for name, service in found.items():
        ports = bound_ports(service["command"])
        for port in ports:
            assert port in [str(p) for p in service.get("expose", [])], (name, port)
            for host in names_of(name, service):
                binders.setdefault(host, set()).add(port)
            # The healthcheck asks the service itself, on the port it binds.
            assert f"tcp://127.0.0.1:{port}" in service["healthcheck"]["test"], name
    experiment = found["experiment"]["command"]
    for flag, host in (("--env", "env"), ("--agent", "agent")):
        match = TCP.fullmatch(experiment[experiment.index(flag) + 1])
        assert match and match.group(1) == host
        assert match.group(2) in binders[host], f"nothing binds {host}:{match.group(2)}"


def free_ports(count: int) -> list[int]:
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def serving_line(child: subprocess.Popen) -> str:
    """Block until a server prints that it serves (its socket is bound); returns the line."""
    line = child.stderr.readline()
    assert "serving" in line, line + child.stderr.read()
    return line


class LocalCompose:
    """Runs compose services as local processes."""

    def __init__(self, compose: dict, directory: Path):
        self.compose = compose
        self.volumes = {"/keys": directory / "keys", "/data": directory / "data"}
        for path in self.volumes.values():
            path.mkdir(exist_ok=True)
        self.ports: dict[str, int] = {}
        self.children: list[subprocess.Popen] = []

    def _port(self, port: str) -> int:
        if port not in self.ports:
            self.ports[port] = free_ports(1)[0]
        return self.ports[port]

    def local(self, argument: str) -> str:
        argument = TCP.sub(lambda m: f"tcp://127.0.0.1:{self._port(m.group(2))}", argument)
        for inside, outside in self.volumes.items():
            if argument == inside or argument.startswith(inside + "/"):
                argument = str(outside) + argument[len(inside) :]
        if argument.startswith("/app/"):
            argument = str(ROOT / argument[len("/app/") :])
        return argument

    def command(self, command: list[str]) -> list[str]:
        head = {
            "rlbridge": [sys.executable, "-m", "rlbridge"],
            "node": [check_js()],
            "test": [shutil.which("test") or "/usr/bin/test"],
        }.get(command[0])
        return (head or [self.local(command[0])]) + [self.local(arg) for arg in command[1:]]

    def environment(self, service: dict) -> dict[str, str]:
        values = {
            key: self.local(str(value)) for key, value in (service.get("environment") or {}).items()
        }
        return {**os.environ, "PYTHONPATH": str(ROOT), **values}

    def start(self, service: dict) -> subprocess.Popen:
        child = subprocess.Popen(
            self.command(service["command"]),
            cwd=ROOT,
            text=True,
            env=self.environment(service),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.children.append(child)
        return child

    def healthy(self, service: dict, attempts: int = 10) -> bool:
        """Run the healthcheck as compose would, up to ``attempts`` times (each waits itself)."""
        for _ in range(attempts):
            check = subprocess.run(
                self.command(service["healthcheck"]["test"][1:]),
                cwd=ROOT,
                env=self.environment(service),
                capture_output=True,
                text=True,
                timeout=60,
            )
            if check.returncode == 0:
                return True
        return False


@pytest.fixture(scope="module")
def keys_volume(compose, tmp_path_factory) -> Path:
    """The `keys` service, run once: later runs share its volume as compose's do."""
    directory = tmp_path_factory.mktemp("compose")
    local = LocalCompose(compose, directory)
    try:
        keys = local.start(services(compose)["keys"])
        assert keys.wait(timeout=60) == 0, keys.stderr.read()
    finally:
        stop(local.children)
    assert (directory / "keys" / "server.key_secret").exists()
    return directory / "keys"


def test_the_composition_runs_locally_with_each_agent(compose, keys_volume, tmp_path):
    """The three compositions (Python, C and JavaScript agent) run side by side, as three
    `docker compose up` on three machines would."""
    build_c()
    found = services(compose, {**TEST_VARIABLES, "AGENT": "first"})
    runs = {}
    try:
        for profile, agent_name in AGENT_SERVICES.items():
            (tmp_path / profile).mkdir()
            local = LocalCompose(compose, tmp_path / profile)
            local.volumes["/keys"] = keys_volume
            agent = found[agent_name]
            runs[profile] = run = {"local": local, "agent_service": agent}
            run["env"] = local.start(found["env"])
            run["agent"] = local.start(agent)
        for profile, run in runs.items():
            local, agent = run["local"], run["agent_service"]
            run["serving"] = [serving_line(run["env"]), serving_line(run["agent"])]
            # Compose starts the experiment once env is healthy; the agent's check runs too.
            # (The three env services are the same; one of them proves its check.)
            checked = (found["env"], agent) if profile == "python" else (agent,)
            run["health"] = [
                (
                    service,
                    subprocess.Popen(
                        local.command(service["healthcheck"]["test"][1:]),
                        cwd=ROOT,
                        env=local.environment(service),
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    ),
                )
                for service in checked
            ]
        for profile, run in runs.items():
            for service, check in run["health"]:
                if check.wait(timeout=60) != 0:  # a first try may come before the server is up
                    assert run["local"].healthy(service), f"{profile}: {service['command']}"
            run["experiment"] = run["local"].start(found["experiment"])
        for profile, run in runs.items():
            out, err = run["experiment"].communicate(timeout=120)
            assert run["experiment"].returncode == 0, f"{profile}: {err}"
            assert re.search(r"episodes \d+\s+steps \d+", out), out
            assert run["local"].healthy(found["experiment"], attempts=1), profile
            # The experiment stops both servers; every tcp bind was encrypted (CURVE).
            assert run["env"].wait(timeout=20) == 0 and run["agent"].wait(timeout=20) == 0
            env_err = run["serving"][0] + run["env"].stderr.read()
            agent_err = run["serving"][1] + run["agent"].stderr.read()
            assert "with CURVE" in env_err and "with CURVE" in agent_err, env_err + agent_err
            assert "refused" not in env_err + agent_err, profile
            runs[profile]["summary"] = re.search(r"episodes .*mean return \S+", out).group()
        # The same seed and policy: the three languages give the same summary.
        assert len({run["summary"] for run in runs.values()}) == 1
    finally:
        stop([child for run in runs.values() for child in run["local"].children])
