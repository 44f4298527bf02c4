"""Per-instance parts of a batch (PROTOCOL.md section 16): call codes, columns, states, seeds.

Each instance of a batched step has a call (:class:`EnvCall`, :class:`AgentCall`) and
plain per-instance columns (calls, rewards, terminals: :func:`encode_column`,
:func:`decode_column`); :class:`InstanceStates` tracks where each instance is, and
:func:`instance_seed` gives each instance its seed. The stacked values themselves are
:class:`rlbridge.protocol.batch.Batch`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, Any

from rlbridge.protocol.errors import ProtocolError, WrongState
from rlbridge.protocol.seeds import seed_words
from rlbridge.protocol.values import DTYPES, decode_array, encode_array

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from rlbridge.protocol.values import Frames


class EnvCall(IntEnum):
    """What ENV_BATCH_STEP asks of one instance (a ``|u1`` code per instance)."""

    STEP = 0  # env_step with the next action of the batch
    START = 1  # env_start: a new episode
    NONE = 2  # nothing: the instance is left as it is


class AgentCall(IntEnum):
    """What AGENT_BATCH_STEP asks of the agent for one instance (a ``|u1`` code per instance)."""

    STEP = 0  # agent_step(reward, observation) -> action
    START = 1  # agent_start(observation) -> action
    END = 2  # agent_end(reward); no observation, no action
    END_START = 3  # agent_end(reward), then agent_start(observation) -> action
    NONE = 4  # nothing for this instance


#: The calls whose instance carries a value: an action (env) or an observation (agent).
#: Boolean arrays indexed by call code, made on first use (``__getattr__``): numpy is
#: imported by the first batch, not by a process that plays one instance.
_CALL_TABLES = {
    "ENV_TAKES_ACTION": (True, False, False),
    "ENV_GIVES_OBSERVATION": (True, True, False),
    "AGENT_TAKES_OBSERVATION": (True, True, False, True, False),
}
if TYPE_CHECKING:
    ENV_TAKES_ACTION: npt.NDArray[np.bool_]
    ENV_GIVES_OBSERVATION: npt.NDArray[np.bool_]
    AGENT_TAKES_OBSERVATION: npt.NDArray[np.bool_]


def __getattr__(name: str) -> Any:
    flags = _CALL_TABLES.get(name)
    if flags is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import numpy

    table = globals()[name] = numpy.array(flags)
    return table


#: The most instances one environment process serves (PROTOCOL.md 16.2): a larger
#: ENV_BATCH_INIT ``num_instances`` is BAD_FIELD, and so are RUN_BATCH quotas and groups past it.
MAX_INSTANCES = 65536
#: The most instances one agent process answers for (PROTOCOL.md 16.4), as in the C library:
#: 16 environment processes of MAX_INSTANCES. A larger AGENT_BATCH_INIT is BAD_FIELD.
MAX_AGENT_INSTANCES = 1 << 20


def encode_column(array: npt.NDArray[Any]) -> list[Any]:
    """A per-instance column (calls, rewards, terminals) as an inline array
    ``[dtype, [n], data]``."""
    return encode_array(array)


def decode_column(
    entry: Any, frames: Frames, dtype: str, name: str, count: int | None = None
) -> npt.NDArray[Any]:
    """A one-dimensional array of ``dtype`` (and, if given, ``count`` entries); BAD_FIELD else."""
    array = decode_array(entry, frames)
    # decode_array's dtypes are the wire table's objects: ``is`` spares building dtype.str.
    if (array.dtype is not DTYPES.get(dtype) and array.dtype.str != dtype) or array.ndim != 1:
        raise ProtocolError(
            f"{name} must be a one-dimensional {dtype} array; got "
            f"{array.dtype.str} of shape {list(array.shape)}"
        )
    if count is not None and array.shape[0] != count:
        raise ProtocolError(
            f"{name} must have {count} entries, one per instance; got {array.shape[0]}"
        )
    return array


#: Each call-code enum's codes as bytes, for decode_calls (its codes run 0 .. len - 1).
_VALID_CODES: dict[type[IntEnum], bytes] = {}


def decode_calls(entry: Any, frames: Frames, codes: type[IntEnum], name: str) -> npt.NDArray[Any]:
    """A ``|u1`` column of per-instance call codes, each one of ``codes``."""
    calls = decode_column(entry, frames, "|u1", name)
    # Deleting every valid code from the bytes leaves the invalid ones: one C pass, where
    # calls.max() is a numpy reduction that costs more than the whole check at small N.
    valid = _VALID_CODES.get(codes)
    if valid is None:
        valid = _VALID_CODES[codes] = bytes(range(len(codes)))
    if calls.tobytes().translate(None, valid):
        bad = int((calls >= len(codes)).nonzero()[0][0])
        raise ProtocolError(
            f"{name}[{bad}] is {int(calls[bad])}; expected one of "
            + ", ".join(f"{c.name}={int(c)}" for c in codes)
        )
    return calls


class InstanceState(IntEnum):
    """Where one instance of a batch is (PROTOCOL.md 16.2)."""

    NEW = 0  # no episode since the batch was initialised
    RUNNING = 1
    ENDED = 2  # its last step was terminal (or, for an agent, its last call was an end)


#: NEW and RUNNING as plain ints: ``in`` on a bytearray takes them without an enum lookup.
_NEW, _RUNNING = int(InstanceState.NEW), int(InstanceState.RUNNING)


class InstanceStates:
    """The states of a batch's instances, numbered ``first`` .. ``first + count - 1``, as
    far as a check reads them: NEW until an instance's first episode starts, RUNNING after.

    ``states`` is a bytearray of InstanceState codes (cheaper to index one by one than a
    numpy array). :meth:`refuse_new` rejects calls that need an episode on an instance
    that has none, before anything is applied. ENDED is not kept: a call after a terminal
    step is served as one during an episode (PROTOCOL.md 16.3 and 16.4), so no check tells
    the two apart, and a batched step writes nothing once every instance has started.
    """

    def __init__(self, count: int, first: int = 0):
        global np
        import numpy as np  # a module global for every later step: states exist only in batches

        self.first = first
        self.states = bytearray(count)

    def reset(self) -> None:
        self.states[:] = bytes(len(self.states))

    def refuse_new(
        self,
        calls: npt.NDArray[np.uint8],
        needs_episode: npt.NDArray[np.bool_],
        codes: type[IntEnum],
        allowed: str,
        start: int = 0,
    ) -> None:
        """WRONG_STATE if the instance at ``start + i`` is NEW and its call ``calls[i]`` needs
        an episode (``needs_episode``, a table by call code, says which do); ``allowed`` names
        the calls it may get. One array comparison for all of them; the error names the
        first in order."""
        # Once every instance has started, the usual case: one memchr over the states
        # instead of the array work below.
        if _NEW not in self.states:
            return
        rows = needs_episode[calls].nonzero()[0]
        states = np.frombuffer(self.states, dtype=np.uint8)[start:]
        new = (states[rows] == _NEW).nonzero()[0]
        if len(new):
            offset = int(rows[new[0]])
            raise WrongState(
                f"instance {self.first + start + offset} has no episode: its "
                f"call must be {allowed}; got {codes(int(calls[offset])).name}"
            )

    def start(
        self, calls: npt.NDArray[np.uint8], starts_episode: npt.NDArray[np.bool_], start: int = 0
    ) -> None:
        """The instance at ``start + i`` leaves NEW when its call ``calls[i]`` starts an
        episode (``starts_episode``, a table by call code, says which do)."""
        if _NEW not in self.states:  # every instance has started: nothing changes
            return
        rows = starts_episode[calls].nonzero()[0] + start
        np.frombuffer(self.states, dtype=np.uint8)[rows] = _RUNNING


def derive_seeds(seed: int) -> tuple[int, int]:
    """The environment's and the agent's seeds from the experiment seed (PROTOCOL.md, "Seeding")."""
    env_seed, agent_seed = seed_words(seed, 2)
    return env_seed, agent_seed


def instance_seed(seed: int, instance: int) -> int:
    """The seed of instance ``instance`` of a batch seeded with ``seed`` (PROTOCOL.md 16.5).

    Instance 0 keeps ``seed`` itself, so one instance behaves exactly as an unbatched
    peer; instance i > 0 takes the first word of numpy's ``SeedSequence([seed, i])``.
    """
    if instance == 0:
        return seed
    return seed_words([seed, instance], 1)[0]
