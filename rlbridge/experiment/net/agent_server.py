"""AgentServer: an Agent's ``agent_*`` calls, one instance or a batch of them.

Over :class:`~rlbridge.experiment.net.server.RequestServer`'s loop and checks, it adds
the agent's handler table and state machine, AGENT_BATCH_INIT/STEP (PROTOCOL.md 16.4),
and the typed decoder of a delegated episode's every AGENT_STEP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from rlbridge.agents.base import Agent
from rlbridge.experiment.net.bodies import (
    AgentBatchInit,
    AgentBatchStep,
    agent_batch_init_body,
    agent_batch_step_body,
    agent_query_body,
    agent_step_body,
    nil_body,
    reward_body,
    str_body,
    task_spec_body,
    value_body,
)
from rlbridge.experiment.net.server import RequestServer
from rlbridge.protocol.errors import ProtocolError, RLBridgeError, WrongState
from rlbridge.protocol.instances import AgentCall, InstanceStates
from rlbridge.protocol.messages import Envelope, MessageType
from rlbridge.protocol.queries import QueryRequest
from rlbridge.protocol.states import (
    AGENT_ALLOWED,
    AGENT_MOVES,
    AGENT_STATE_MEANINGS,
    AgentState,
    next_agent_state,
)
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.typed import RewardValue, decoder, prefix
from rlbridge.protocol.values import Value, encode_value

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from rlbridge.agents.batch import BatchAgent, as_batch_agent
    from rlbridge.protocol.batch import as_batch, encode_batch

    _AGENT_NEEDS_EPISODE: npt.NDArray[np.bool_]
    _AGENT_STARTS_EPISODE: npt.NDArray[np.bool_]

T = MessageType


def _load_batched() -> None:
    """numpy, the batched wire and the call tables, bound as this module's globals by
    AGENT_BATCH_INIT: an agent that serves one instance never loads numpy, and each
    AGENT_BATCH_STEP (which needs that init first) finds them as globals."""
    global np, as_batch, as_batch_agent, encode_batch, _AGENT_NEEDS_EPISODE, _AGENT_STARTS_EPISODE
    import numpy as np

    from rlbridge.agents.batch import as_batch_agent
    from rlbridge.protocol.batch import as_batch, encode_batch

    if "_AGENT_NEEDS_EPISODE" in globals():
        return
    #: Whether each call (indexed by its code) needs an episode in progress on its instance:
    #: a table look-up per call, cheaper than np.isin on every batched step.
    _AGENT_NEEDS_EPISODE = np.zeros(256, dtype=bool)
    _AGENT_NEEDS_EPISODE[[int(AgentCall.STEP), int(AgentCall.END), int(AgentCall.END_START)]] = True
    #: Whether each call starts an episode on its instance: START and END_START.
    _AGENT_STARTS_EPISODE = np.zeros(256, dtype=bool)
    _AGENT_STARTS_EPISODE[[int(AgentCall.START), int(AgentCall.END_START)]] = True


class AgentServer(RequestServer[AgentState]):
    """Serves an Agent's ``agent_*`` calls."""

    role = "agent"
    init_types, cleanup_type = frozenset({T.AGENT_INIT, T.AGENT_BATCH_INIT}), T.AGENT_CLEANUP
    allowed = AGENT_ALLOWED
    meanings = AGENT_STATE_MEANINGS
    next_state = staticmethod(next_agent_state)
    moves = AGENT_MOVES
    #: AGENT_STEP ``[reward, observation]`` of the usual shape, decoded and checked in one
    #: call but for its arrays, which agent_step_body checks.
    typed = {prefix(T.AGENT_STEP): decoder(T.AGENT_STEP, RewardValue)}

    def __init__(self, agent: Agent, address: str, **options: Any) -> None:
        super().__init__(address, **options)
        self.agent = agent
        self.task_spec: TaskSpec | None = None
        self.state = AgentState.FRESH
        self.handlers.update(
            {
                T.AGENT_INIT: (task_spec_body, self._agent_init),
                T.AGENT_START: (value_body, self._agent_start),
                T.AGENT_STEP: (agent_step_body, self._agent_step),
                T.AGENT_END: (reward_body, self._agent_end),
                T.AGENT_CLEANUP: (nil_body, self._agent_cleanup),
                T.AGENT_MESSAGE: (str_body, self._agent_message),
                T.AGENT_QUERY: (agent_query_body, self._agent_query),
                T.AGENT_BATCH_INIT: (agent_batch_init_body, self._agent_batch_init),
                T.AGENT_BATCH_STEP: (agent_batch_step_body, self._agent_batch_step),
            }
        )
        self.batch_agent: BatchAgent | None = None  # set by AGENT_BATCH_INIT
        self.instances: InstanceStates | None = None

    def _agent_init(
        self, message: Envelope, spec: TaskSpec, frames: list[memoryview], identity: bytes
    ) -> None:
        self.batch_agent = None
        self.task_spec = spec
        self.agent.agent_init(spec)
        return None

    def _agent_start(
        self, message: Envelope, observation: Value, frames: list[memoryview], identity: bytes
    ) -> list[object]:
        return encode_value(self.agent.agent_start(observation), frames)

    def _agent_step(
        self,
        message: Envelope,
        reward_observation: tuple[float, Value],
        frames: list[memoryview],
        identity: bytes,
    ) -> list[object]:
        action = self.agent.agent_step(*reward_observation)
        # encode_value's first case inline: the per-step path's every frame is counted
        # (docs/speed.md, "One per-step path").
        return (
            [action.ints, action.doubles, action.chars, ()]
            if not action.arrays
            else encode_value(action, frames)
        )

    def _agent_end(
        self, message: Envelope, reward: float, frames: list[memoryview], identity: bytes
    ) -> None:
        self.agent.agent_end(reward)
        return None

    def _agent_cleanup(
        self, message: Envelope, _: None, frames: list[memoryview], identity: bytes
    ) -> None:
        if self.batch_agent is not None:
            self.batch_agent.agent_cleanup()
            self.batch_agent = None
        else:
            self.agent.agent_cleanup()
        return None

    def _agent_message(
        self, message: Envelope, text: str, frames: list[memoryview], identity: bytes
    ) -> str:
        if self.batch_agent is not None:
            return self.batch_agent.agent_message(text)
        return self.agent.agent_message(text)

    def _agent_query(
        self, message: Envelope, request: QueryRequest, frames: list[memoryview], identity: bytes
    ) -> None:
        """SEED, the one query an agent answers: a batch seeds instance i with
        ``instance_seed(A, i)``, or the one instance named with A itself."""
        seed = cast(int, request.argument)  # read_query passes an agent's SEED only with an int
        if self.batch_agent is not None:
            self.batch_agent.seed_instances(seed, request.instance)
        elif request.instance not in (None, 0):
            raise ProtocolError(
                f"query instance must be nil or 0 for an agent of one instance; "
                f"got {request.instance}"
            )
        else:
            self.agent.seed(seed)
        return None

    # -- batches (PROTOCOL.md 16.4) --------------------------------------------------
    def _agent_batch_init(
        self, message: Envelope, body: AgentBatchInit, frames: list[memoryview], identity: bytes
    ) -> None:
        _load_batched()
        self.task_spec = body.task_spec
        batch_agent = as_batch_agent(self.agent)
        batch_agent.batch_init(body.task_spec, body.num_instances)
        self.batch_agent = batch_agent
        self.instances = InstanceStates(body.num_instances)
        return None

    def _agent_batch_step(
        self, message: Envelope, body: AgentBatchStep, frames: list[memoryview], identity: bytes
    ) -> list[object]:
        instances, batch_agent = self.instances, self.batch_agent
        if instances is None or batch_agent is None:  # BATCHED follows AGENT_BATCH_INIT's setting
            raise WrongState("AGENT_BATCH_STEP needs a successful AGENT_BATCH_INIT first")
        calls = np.asarray(body.calls, dtype=np.uint8)
        first, count = body.first_instance, len(instances.states)
        if first + len(calls) > count:
            raise ProtocolError(
                f"AGENT_BATCH_STEP asks for instances {first}.."
                f"{first + len(calls) - 1}; the agent answers for {count} "
                f"instances (0..{count - 1}, AGENT_BATCH_INIT)"
            )
        instances.refuse_new(calls, _AGENT_NEEDS_EPISODE, AgentCall, "START or NONE", first)
        actions = batch_agent.batch_step(first, body.calls, body.rewards, body.observations)
        actions = as_batch(actions)
        if actions.count != body.observations.count:
            raise RLBridgeError(
                f"the agent returned {actions.count} actions for "
                f"{body.observations.count} calls that take one"
            )
        instances.start(calls, _AGENT_STARTS_EPISODE, first)
        return encode_batch(actions, frames)
