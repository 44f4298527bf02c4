"""One legacy experiment's session in `rlbridge glue`: RL_* request frames (codes 20-35) in,
replies out, served by an :class:`~rlbridge.experiment.api.Experiment`.

The payloads are RL-Glue 3.0.4's ``RL_server_experiment.c``'s (docs/legacy.md's table).
RL_step and RL_episode reply with the environment's terminal int32 unchanged; on an RL_step
that called ``agent_end`` the action field holds the action that ended the episode, which
an RL_step after a terminal one applies again (PROTOCOL.md section 7).
"""

from __future__ import annotations

import contextlib
import logging
import socket
from typing import Any, Protocol

from rlbridge.experiment.api import Experiment
from rlbridge.experiment.rlglue3.framing import (
    ConnectionClosed,
    FramedSocket,
    FrameReadTimeout,
    peer_closed,
)
from rlbridge.experiment.rlglue3.peers import LegacyAgent, LegacyEnvironment, PeerLost
from rlbridge.protocol.errors import (
    PeerTimeout,
    RLBridgeError,
    TaskSpecError,
    UnknownMessageType,
)
from rlbridge.protocol.rlglue3 import (
    EMPTY_VALUE_BYTES,
    Code,
    Reader,
    Role,
    code_name,
    pack_double,
    pack_int,
    pack_string,
    pack_value,
)
from rlbridge.protocol.taskspec import SpaceSpec, TaskSpec, parse

log = logging.getLogger("rlbridge.glue")


class Owner(Protocol):
    """What a session asks of the glue that accepted it (rlbridge.experiment.rlglue3.glue's
    GlueServer), named here so that the session does not import the glue that imports it."""

    peer_timeout: float | None
    seed: int | None
    check_actions: bool

    def acquire(self, role: Role, session: Session) -> Any: ...

    def report(self, message: str) -> None: ...


#: Errors after which a peer's connection (or state) cannot be trusted: the session ends.
FATAL = (PeerLost, PeerTimeout)


class LegacyExperiment(Experiment):
    """Experiment whose RL_init accepts task specs that are not RL-Glue 3.0.

    Original RL-Glue never parses the task spec, so legacy programs may use any
    string; the agent then gets it unchanged and actions go unchecked.
    Legacy and remote agents get the environment's exact string. Between a legacy
    environment and a legacy agent, ``RL_episode`` is the :class:`ForwardingLoop`.
    """

    def __init__(self, env, agent, *, seed: int | None = None, check_actions: bool = True):
        super().__init__(env, agent, seed=seed, check_actions=check_actions)
        forwarding = isinstance(env, LegacyEnvironment) and isinstance(agent, LegacyAgent)
        self.forwarding = ForwardingLoop() if forwarding else None
        #: What the glue asked for; each RL_init checks actions only if its task spec parses.
        self.check_requested = check_actions
        self.agent_takes_text = self.agent_takes_text or isinstance(agent, LegacyAgent)

    def RL_init(self) -> str:
        spec = self.env.env_init()
        text = spec if isinstance(spec, str) else str(spec)
        parsed = True
        try:
            self.task_spec = spec if isinstance(spec, TaskSpec) else parse(spec)
        except TaskSpecError as err:
            log.warning("the task spec is not RL-Glue 3.0 (%s); actions go unchecked", err)
            self.task_spec = TaskSpec(SpaceSpec(), SpaceSpec())
            parsed = False
        self.check_actions = self.check_requested and parsed
        self.agent.agent_init(text if self.agent_takes_text or not parsed else self.task_spec)
        self.initialised(text)
        return text

    def play_episode(self, max_steps: int) -> None:
        if self.forwarding is None:
            super().play_episode(max_steps)
        else:
            self.forwarding.play(self, max_steps)


class ForwardingLoop:
    """RL_episode between two legacy clients: the counting rules of RL_start + RL_step, with
    observations and actions forwarded as bytes; only actions are decoded, to be checked."""

    def play(self, experiment: LegacyExperiment, max_steps: int) -> None:
        env, agent, counter = experiment.env, experiment.agent, experiment.counter
        counter.start(max_steps)
        experiment.episode += 1
        action = agent.agent_start_raw(env.env_start_raw())
        check = experiment.one.check  # RL_init's: the task spec's, if actions are checked
        try:
            while counter.running:
                if check is not None:
                    check(agent.decode_action(action))
                terminal, reward, observation = env.env_step_raw(action)
                if counter.step(reward, terminal):
                    agent.agent_end(reward)
                    break
                action = agent.agent_step_raw(reward, observation)
        finally:
            # The action a further RL_step applies, also after a terminal step (3.0.4).
            experiment.last_action = agent.decode_action(action)


class Session:
    """Serves one legacy experiment connection until kRLTerm, its disconnect or a fatal error."""

    def __init__(self, server: Owner, conn: FramedSocket):
        self.server = server
        self.conn = conn
        if server.peer_timeout:
            # A request once begun must arrive within the glue's peer timeout; the time
            # between requests stays unbounded (the experiment may think).
            conn.frame_read_timeout_ms = round(server.peer_timeout * 1000)
        self.bound: dict[Role, object] = {}
        self.experiment: LegacyExperiment | None = None
        self.finished = False
        self.aborted = False
        self.waiting = False  # inside GlueServer.acquire

    # -- peers ----------------------------------------------------------------------
    def _peer(self, role: Role):
        peer = self.bound.get(role)
        if peer is None:
            peer = self.bound[role] = self.server.acquire(role, self)
        return peer

    def _experiment(self) -> LegacyExperiment:
        if self.experiment is None:
            env = self._peer(Role.ENVIRONMENT)
            agent = self._peer(Role.AGENT)
            self.experiment = LegacyExperiment(
                env, agent, seed=self.server.seed, check_actions=self.server.check_actions
            )
        return self.experiment

    def experiment_alive(self) -> bool:
        return not peer_closed(self.conn.sock)

    def abort(self) -> None:
        """Stop serving (the glue is closing): unblock the read and end the session. A session
        waiting for a peer wakes by itself and sends its experiment an ERROR first."""
        self.aborted = True
        if self.waiting:
            return
        with contextlib.suppress(OSError):
            self.conn.sock.shutdown(socket.SHUT_RDWR)

    def _where(self) -> str:
        exp = self.experiment
        if exp is None or exp.episode == 0:
            return "before any episode"
        state = "mid-episode" if not exp.counter.terminal else "between episodes"
        return f"{state}: episode {exp.episode}, step {exp.counter.num_steps}"

    # -- the request loop ----------------------------------------------------------------
    def run(self) -> None:
        conn = self.conn
        try:
            while True:
                try:
                    request = conn.read_frame()
                except FrameReadTimeout as err:  # the socket is closed: no ERROR can go out
                    self.server.report(f"legacy experiment at {err}")
                    return
                except ConnectionClosed:
                    if not self.aborted:
                        self._report_disconnect()
                    return
                except RLBridgeError as err:  # an oversized frame: the stream is lost
                    self.server.report(f"legacy experiment at {conn.peer}: {err}; closed")
                    self._send_error(str(err))
                    return
                if request.code == Code.RL_TERM:
                    conn.send_frame(Code.RL_TERM)
                    log.info("legacy experiment at %s ended the session (kRLTerm)", conn.peer)
                    return
                try:
                    reply = self.handle(
                        request.code, Reader(request.payload, code_name(request.code))
                    )
                except FATAL as err:
                    self.server.report(
                        f"{err}; the session with the experiment at {conn.peer} ends"
                    )
                    self._send_error(str(err))
                    return
                except UnknownMessageType as err:
                    log.warning("from %s: %s", conn.peer, err)
                    self._send_error(str(err))
                    continue
                except RLBridgeError as err:
                    log.warning("%s from %s failed: %s", code_name(request.code), conn.peer, err)
                    self._send_error(f"{code_name(request.code)} failed: {err}")
                    continue
                except Exception as err:  # environment or agent code raised: report, go on
                    log.exception("%s from %s raised", code_name(request.code), conn.peer)
                    self._send_error(
                        f"{code_name(request.code)} failed: {type(err).__name__}: {err}"
                    )
                    continue
                conn.send_frame(request.code, reply)
        except OSError as err:
            if not self.aborted:
                self.server.report(f"legacy experiment at {conn.peer}: connection failed: {err}")
        finally:
            conn.close()

    def _report_disconnect(self) -> None:
        exp = self.experiment
        if exp is not None and not exp.counter.terminal:
            self.server.report(
                f"legacy experiment at {self.conn.peer} disconnected {self._where()}; "
                "the agent and environment are told to stop"
            )
        else:
            log.info("legacy experiment at %s disconnected", self.conn.peer)

    def _send_error(self, message: str) -> None:
        with contextlib.suppress(OSError):
            self.conn.send_frame(Code.ERROR, pack_string(message))

    def handle(self, code: int, reader: Reader) -> bytes:
        """The reply payload for one request; raises for anything that gets an ERROR frame."""
        if code == Code.RL_INIT:
            reply = pack_string(self._experiment().RL_init())
        elif code == Code.RL_START:
            observation, action = self._experiment().RL_start()
            reply = pack_value(observation) + pack_value(action)
        elif code == Code.RL_STEP:
            exp = self._experiment()
            applied = exp.last_action
            outcome = exp.RL_step()
            shown = applied if outcome.action is None else outcome.action
            reply = b"".join(
                (
                    pack_int(int(outcome.terminal)),
                    pack_double(outcome.reward),
                    pack_value(outcome.observation),
                    pack_value(shown) if shown is not None else EMPTY_VALUE_BYTES,
                )
            )
        elif code == Code.RL_CLEANUP:
            self._experiment().RL_cleanup()
            reply = b""
        elif code == Code.RL_RETURN:
            reply = pack_double(self.experiment.RL_return() if self.experiment else 0.0)
        elif code == Code.RL_NUM_STEPS:
            reply = pack_int(self.experiment.RL_num_steps() if self.experiment else 0)
        elif code == Code.RL_NUM_EPISODES:
            reply = pack_int(self.experiment.RL_num_episodes() if self.experiment else 0)
        elif code == Code.RL_EPISODE:
            max_steps = reader.uint()
            reply = pack_int(int(self._experiment().RL_episode(max_steps)))
        elif code == Code.RL_AGENT_MESSAGE:
            message = reader.string()
            reply = pack_string(self._peer(Role.AGENT).agent_message(message))
        elif code == Code.RL_ENV_MESSAGE:
            message = reader.string()
            reply = pack_string(self._peer(Role.ENVIRONMENT).env_message(message))
        else:
            raise UnknownMessageType(
                f"{code_name(code)} is not an experiment request; expected RL_init 20, "
                "RL_start 21, RL_step 22, RL_cleanup 23, RL_return 24, RL_num_steps 25, "
                "RL_num_episodes 26, RL_episode 27, RL_agent_message 33, RL_env_message 34 "
                "or kRLTerm 35"
            )
        extra = reader.end()
        if extra:
            log.warning(
                "%s from %s carried %d unread bytes; ignored",
                code_name(code),
                self.conn.peer,
                extra,
            )
        return reply
