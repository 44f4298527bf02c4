"""EnvironmentServer: an Environment's ``env_*`` calls, delegated episodes and batches.

Over :class:`~rlbridge.experiment.net.server.RequestServer`'s loop and checks, it adds
the environment's handler table and state machine, the batched calls of PROTOCOL.md
section 16, and DELEGATE, RUN_EPISODE and RUN_BATCH (delegation.py).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rlbridge.environments.base import Environment
from rlbridge.environments.queries import answer_single
from rlbridge.experiment.batch import BatchLoop
from rlbridge.experiment.net.bodies import (
    BatchInit,
    EnvBatchStep,
    RunBatch,
    delegate_body,
    env_batch_init_body,
    env_batch_step_body,
    env_query_body,
    nil_body,
    run_batch_body,
    run_episode_body,
    str_body,
    value_body,
)
from rlbridge.experiment.net.bodies import Delegation as DelegateBody
from rlbridge.experiment.net.curve import check_agent_address
from rlbridge.experiment.net.delegation import Delegation
from rlbridge.experiment.net.server import RequestServer
from rlbridge.protocol.errors import RLBridgeError, WrongState
from rlbridge.protocol.instances import encode_column
from rlbridge.protocol.messages import CALL_NAMES, Envelope, MessageType, step_body
from rlbridge.protocol.queries import Query, QueryRequest
from rlbridge.protocol.states import ENV_ALLOWED, STATE_MEANINGS, EnvState, next_env_state
from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.values import Value, encode_value

if TYPE_CHECKING:
    from rlbridge.environments.batch import EnvironmentBatch
    from rlbridge.protocol.batch import encode_batch
    from rlbridge.render.publish import StatePublisher

T = MessageType
_DELEGATED = frozenset({int(T.RUN_EPISODE), int(T.RUN_BATCH)})


class EnvironmentServer(RequestServer[EnvState]):
    """Serves an Environment's ``env_*`` calls and runs delegated episodes (the fast path).

    ``delegation`` builds the object that plays delegated episodes and batches for this
    server;
    ``publisher`` (a StatePublisher) sends the environment's state to renderers.
    ``make_env`` builds the instances of a batch (ENV_BATCH_INIT, PROTOCOL.md 16.2; by
    default deep copies of ``env``, which env_init and ``seed`` then reset), and ``batch``
    is the number of instances an ENV_BATCH_INIT for 0 gets.
    """

    role = "environment"
    init_types, cleanup_type = frozenset({T.ENV_INIT, T.ENV_BATCH_INIT}), T.ENV_CLEANUP
    # Another client's DELEGATE would redirect the owner's episodes; its RUN_EPISODE or
    # RUN_BATCH would play some of them.
    owner_only = frozenset({T.SHUTDOWN, T.DELEGATE, T.RUN_EPISODE, T.RUN_BATCH})
    allowed = ENV_ALLOWED
    meanings = STATE_MEANINGS
    next_state = staticmethod(next_env_state)

    def __init__(
        self,
        env: Environment,
        address: str,
        *,
        delegation: Callable[[EnvironmentServer], Delegation] = Delegation,
        publisher: StatePublisher | None = None,
        make_env: Callable[[], Environment] | None = None,
        batch: int = 1,
        **options: Any,
    ) -> None:
        super().__init__(address, **options)
        self.env = env
        self.publisher = publisher
        self.task_spec: TaskSpec | None = None
        self.state = EnvState.FRESH
        self.make_env = make_env
        self.batch = batch
        self.env_batch: EnvironmentBatch | None = None  # set by ENV_BATCH_INIT
        self.batch_loop: BatchLoop | None = None
        #: Whether a RUN_BATCH may have left episodes of the loop in progress, which the next
        #: ENV_BATCH_STEP abandons (a walk over every instance's counter, once, not per step).
        self.loop_played = False
        self.handlers.update(
            {
                T.ENV_INIT: (nil_body, self._env_init),
                T.ENV_START: (nil_body, self._env_start),
                T.ENV_STEP: (value_body, self._env_step),
                T.ENV_CLEANUP: (nil_body, self._env_cleanup),
                T.ENV_MESSAGE: (str_body, self._env_message),
                T.ENV_QUERY: (env_query_body, self._env_query),
                T.DELEGATE: (delegate_body, self._delegate),
                T.RUN_EPISODE: (run_episode_body, self._run_episode),
                T.ENV_BATCH_INIT: (env_batch_init_body, self._env_batch_init),
                T.ENV_BATCH_STEP: (env_batch_step_body, self._env_batch_step),
                T.RUN_BATCH: (run_batch_body, self._run_batch),
            }
        )
        self.delegation = delegation(self)  # last: it may read the server's parts

    def close(self) -> None:
        self.delegation.close()
        if self.publisher is not None:
            self.publisher.close()
        super().close()

    def _env_init(
        self, message: Envelope, _: None, frames: list[memoryview], identity: bytes
    ) -> str:
        self._end_batch()
        spec = self.env.env_init()
        self.task_spec = spec if isinstance(spec, TaskSpec) else parse(spec)
        return spec if isinstance(spec, str) else str(spec)

    def _env_start(
        self, message: Envelope, _: None, frames: list[memoryview], identity: bytes
    ) -> list[object]:
        observation = self.env.env_start()
        if self.publisher is not None:
            self.publisher.offer(self.env.state_snapshot, message.episode, 0, False)
        return encode_value(observation, frames)

    def _env_step(
        self, message: Envelope, action: Value, frames: list[memoryview], identity: bytes
    ) -> list[object]:
        spec = self.task_spec
        if spec is None:  # ENV_STEP's states all follow an ENV_INIT, which sets it
            raise WrongState("ENV_STEP needs a successful ENV_INIT first")
        spec.check_action(action)
        reward, observation, terminal, info = self.step(action, message.episode, -1)
        return step_body(reward, observation, terminal, info, frames)

    def step(
        self, action: Value, episode: int, step: int
    ) -> tuple[float, Value, bool, dict[str, Any] | None]:
        """``env_step(action)`` as the native wire carries it, for ENV_STEP and RUN_EPISODE
        alike, with the state shown to renderers: ``(reward, observation, terminal, info)``.

        The one place a terminal becomes a bool: a legacy environment served through
        ``rlbridge glue --serve-env`` sends an int32, and any non-zero one is true, so its
        terminal of 2 ends the episode (AGENT_END, one more episode) on both paths."""
        result = self.env.env_step(action)
        terminal = result[2]
        if type(terminal) is not bool:
            terminal = bool(terminal)
        if self.publisher is not None:
            self.publisher.offer(self.env.state_snapshot, episode, step, terminal)
        return result[0], result[1], terminal, result[3] if len(result) > 3 else None

    def _check_state(self, msg_type: int, identity: bytes) -> None:
        """RequestServer's state check, and for RUN_EPISODE and RUN_BATCH a delegation: a
        refused request changes nothing (PROTOCOL.md section 12)."""
        RequestServer._check_state(self, msg_type, identity)
        if msg_type in _DELEGATED and self.delegation.agent is None:
            raise WrongState(
                f"{CALL_NAMES[msg_type]} needs a successful DELEGATE first (the agent's address)"
            )

    def _env_cleanup(
        self, message: Envelope, _: None, frames: list[memoryview], identity: bytes
    ) -> None:
        if self.env_batch is not None:
            self.env_batch.batch_cleanup()
            self._end_batch()
        else:
            self.env.env_cleanup()
        return None

    def _env_message(
        self, message: Envelope, text: str, frames: list[memoryview], identity: bytes
    ) -> str:
        if self.env_batch is not None:
            return self.env_batch.batch_message(text)
        return self.env.env_message(text)

    def _env_query(
        self, message: Envelope, request: QueryRequest, frames: list[memoryview], identity: bytes
    ) -> object:
        if request.query is Query.TIMING:
            return [float(seconds) for seconds in self.delegation.timing]
        if self.env_batch is not None:
            return self.env_batch.batch_query(request)
        return answer_single(self.env, request)

    # -- batches (PROTOCOL.md section 16) ------------------------------------------------
    def _env_batch_init(
        self, message: Envelope, body: BatchInit, frames: list[memoryview], identity: bytes
    ) -> list[object]:
        # Imported by the first batch (encode_batch as a global, for each ENV_BATCH_STEP,
        # which needs this init first): a server of one instance never loads them, nor numpy.
        global encode_batch
        from rlbridge.environments.batch import EnvironmentBatch
        from rlbridge.protocol.batch import encode_batch

        count = body.num_instances or self.batch  # a count from the wire is checked by its reader
        self._end_batch()
        batch = EnvironmentBatch(self.make_env or self._copy_env, count, body.first_instance)
        spec = batch.batch_init()
        self.env_batch, self.task_spec = batch, spec
        self.batch_loop = BatchLoop(count, body.first_instance)
        return [str(spec), count]

    def _env_batch_step(
        self, message: Envelope, body: EnvBatchStep, frames: list[memoryview], identity: bytes
    ) -> list[object]:
        env_batch, batch_loop = self.env_batch, self.batch_loop
        if env_batch is None or batch_loop is None:  # BATCHED follows ENV_BATCH_INIT's setting
            raise WrongState("ENV_BATCH_STEP needs a successful ENV_BATCH_INIT first")
        result = env_batch.batch_step(body.calls, body.actions)
        if self.loop_played:  # stepping from outside leaves no episode of the loop going on
            batch_loop.abandon()
            self.loop_played = False
        return [
            encode_column(result.rewards),
            encode_batch(result.observations, frames),
            encode_column(result.terminals),
            result.infos,
        ]

    def _run_batch(
        self, message: Envelope, body: RunBatch, frames: list[memoryview], identity: bytes
    ) -> list[object]:
        self.loop_played = True
        return self.delegation.run_batch(message, body, identity, frames)

    def _copy_env(self) -> Environment:
        try:
            return copy.deepcopy(self.env)
        except Exception as err:  # an environment holding sockets or files, say
            raise RLBridgeError(
                f"this environment cannot serve a batch: copying it for "
                f"more instances failed ({type(err).__name__}: {err}); serve "
                "it with make_env, a function that builds one"
            ) from None

    def _end_batch(self) -> None:
        self.env_batch = None
        self.batch_loop = None

    def _delegate(
        self, message: Envelope, body: DelegateBody, frames: list[memoryview], identity: bytes
    ) -> None:
        check_agent_address(body.agent_address, self.address, self.curve)
        self.delegation.configure(body)
        return None

    def _run_episode(
        self, message: Envelope, _: None, frames: list[memoryview], identity: bytes
    ) -> list[object]:
        # RUN_EPISODE's states all follow an ENV_INIT or ENV_BATCH_INIT, which set the spec.
        spec: TaskSpec = self.task_spec  # type: ignore[assignment]
        return self.delegation.run_episode(message, spec, identity, frames)
