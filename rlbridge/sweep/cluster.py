"""Reach Ray for a sweep: join the cluster that ``--address`` or RAY_ADDRESS names, or start
Ray embedded in this process; each failure is one line that says what to try."""

from __future__ import annotations

import logging
import os
import re
import socket

from rlbridge.extras import require
from rlbridge.protocol.errors import SweepError

#: How long a cluster's HOST:PORT may take to accept a connection.
REACH_TIMEOUT_S = 5.0


def import_ray():
    return require("ray", "rlbridge sweep")


def cluster_address(address: str | None) -> tuple[str | None, str]:
    """The cluster to join and where its address came from: ``--address``, else Ray's own
    ``RAY_ADDRESS`` (what `ray job submit` sets for its entrypoint, and what a Ray user
    expects every Ray program to honour), else None: start Ray embedded. ``local`` asks
    for the embedded start too, as it does in Ray."""
    if address:
        return address, "--address"
    variable = os.environ.get("RAY_ADDRESS", "").strip()
    if variable and variable != "local":
        return variable, "RAY_ADDRESS"
    return None, ""


def start_ray(address: str | None, num_cpus: int | None):
    """Join the cluster at ``address`` (or RAY_ADDRESS), or start Ray embedded in this
    process (no dashboard)."""
    address, source = cluster_address(address)
    if address:
        check_reachable(address, source)  # before importing Ray: a stale address fails at once
    if address and "RAY_AUTH_MODE" not in os.environ and auth_token_present():
        # `ray start --head` (Ray 2.5x) turns on token authentication and writes the token
        # to ~/.ray/auth_token, but a client joining by HOST:PORT sends it only in token
        # mode, which Ray reads when it is imported; a cluster without authentication
        # ignores the token.
        os.environ["RAY_AUTH_MODE"] = "token"
    if not address:
        # What Ray 2.5x does for a new local instance anyway, said explicitly: unset, Ray
        # turns token authentication on and prints a WARNING about it on every sweep.
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    ray = import_ray()
    options = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    if not address:
        try:
            # "local" starts a private instance even when a cluster runs on this machine:
            # ray.init() without an address would join it.
            ray.init(address="local", num_cpus=num_cpus, **options)
        except Exception as err:  # SystemExit (a SIGTERM meanwhile) goes on to run_sweep
            raise SweepError(local_start_failure(err)) from None
        return ray
    try:
        ray.init(address=address, **options)
    except ConnectionError as err:
        lines = [line.strip() for line in str(err.__cause__ or err).splitlines() if line.strip()]
        cause = lines[-1].split(". Note:")[0] if lines else type(err).__name__
        hint = (
            "set RAY_AUTH_MODE=token and give this machine the cluster's token (the head "
            "node's ~/.ray/auth_token, or RAY_AUTH_TOKEN)"
            if "auth" in cause.lower()
            else "start one with `ray start --head` and pass the address it prints, or "
            "--address auto on a node of the cluster"
        )
        raise SweepError(
            f"cannot join the Ray cluster at {address}{origin(source)}: {cause[:300]}; "
            f"{hint}{unset(source)}"
        ) from None
    return ray


def origin(source: str) -> str:
    """Where an address came from, said only when the command line did not give it."""
    return f" (from {source})" if source == "RAY_ADDRESS" else ""


def unset(source: str) -> str:
    return "; or unset RAY_ADDRESS to start Ray on this machine" if source == "RAY_ADDRESS" else ""


def local_start_failure(err: Exception) -> str:
    """One line for a Ray that did not start on this machine: what Ray said, and what to try."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    cause = (lines[0] if lines else type(err).__name__)[:200]
    if "timed out" in cause.lower():
        hint = (
            "Ray's processes did not come up in time, as on a busy machine: try again when "
            "it is quieter, give Ray's GCS server longer with RAY_gcs_server_port_wait_time_s "
            "(seconds, default 30), or join a running cluster with --address"
        )
    else:
        hint = (
            "Ray's own logs are under RAY_TMPDIR (default /tmp)/ray/session_latest/logs; "
            "or join a running cluster with --address"
        )
    return f"Ray did not start on this machine: {cause}; {hint}"


def check_reachable(address: str, source: str = "--address") -> None:
    """Refuse at once a HOST:PORT where nothing listens: Ray itself retries for minutes."""
    match = re.fullmatch(r"(?:ray://)?\[?([^\]]+?)\]?:(\d+)", address)
    if match is None:
        return  # "auto", or a form Ray resolves itself
    try:
        socket.create_connection((match[1], int(match[2])), timeout=REACH_TIMEOUT_S).close()
    except OSError as err:
        raise SweepError(
            f"cannot join the Ray cluster at {address}{origin(source)}: nothing answers "
            f"there ({err.strerror or err}); start one with `ray start --head` and "
            f"pass the address it prints (HOST:6379), or --address auto on a "
            f"node of the cluster{unset(source)}"
        ) from None


def auth_token_present() -> bool:
    return bool(os.environ.get("RAY_AUTH_TOKEN")) or os.path.exists(
        os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    )
