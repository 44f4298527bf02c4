"""Seeded bad (and good) inputs for a server under `rlbridge bench faults`, each with what it must
get.

A :class:`Probe` is the frames of one request and the reply PROTOCOL.md demands for
it: the request's own type (a valid request), an ERROR whose code is one of a set
(never APPLICATION for bad input), or, for requests whose outcome the protocol leaves
open, any reply. :class:`ProbeMaker` draws them from a numpy generator, so one seed
gives one campaign; :class:`StateModel` follows the server's state from its replies
so that valid requests come in valid order and out-of-order ones are known as such.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

import msgpack
import numpy as np

from rlbridge.protocol.errors import ErrorCode
from rlbridge.protocol.messages import PROTOCOL_VERSION, MessageType
from rlbridge.protocol.queries import Query

T = MessageType
E = ErrorCode
INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
#: Codes a request with a broken envelope or body may get: specific, never APPLICATION.
BAD_INPUT = frozenset({E.MALFORMED, E.BAD_FIELD})


class Expect(IntEnum):
    """What a probe must get back."""

    REPLY = 1  # a reply of the request's own type (or an ERROR with one of ``codes``)
    ERROR = 2  # an ERROR reply with one of ``codes`` (never APPLICATION)
    EITHER = 3  # the protocol leaves it open: any well-formed reply or ERROR


class Probe(NamedTuple):
    """One input: its frames, its kind (for the report) and the reply it must get."""

    kind: str
    frames: list
    expect: Expect
    codes: frozenset = frozenset()
    request_type: int = 0  # the type a valid reply repeats (0: none expected)


def pack(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def decodable_ids(payload: bytes) -> tuple[int, int] | None:
    """The seq and episode a reply must repeat: those of a 5-item envelope whose seq and
    episode are int64 integers (PROTOCOL.md: a reply carries the request's seq)."""
    try:
        raw = msgpack.unpackb(payload, strict_map_key=False)
    except Exception:  # msgpack raises several unrelated classes for bad bytes
        return None
    if type(raw) is not list or len(raw) != 5:
        return None
    seq, episode = raw[2], raw[3]
    if type(seq) is not int or type(episode) is not int:
        return None
    if not (INT64_MIN <= seq <= INT64_MAX and INT64_MIN <= episode <= INT64_MAX):
        return None
    return seq, episode


class Scenario(NamedTuple):
    """What a valid conversation with one server looks like."""

    role: str  # "environment" or "agent"
    task_spec: str
    observation: list  # a valid observation in wire form (agents receive it)
    action_range: tuple[int, int]  # the single ACTIONS INTS range


class State(IntEnum):
    NEW = 0  # before INIT
    READY = 1  # after INIT, before START
    RUNNING = 2  # after START, before a terminal step
    ENDED = 3  # after a terminal step (environment) or AGENT_END (agent)
    CLEANED = 4  # after CLEANUP


class StateModel:
    """The server's state as its replies reveal it; says which requests are in order."""

    def __init__(self, role: str):
        self.role = role
        self.state = State.NEW

    def after(self, request_type: int, reply_type: int, reply_body) -> None:
        """Follow a reply. A request the server should have refused but served anyway moves
        the model too (the server acted on it), except out of NEW: only INIT leaves NEW."""
        if reply_type != request_type:
            return  # an error changes nothing
        if self.state == State.NEW and request_type not in (T.ENV_INIT, T.AGENT_INIT):
            return
        if request_type in (T.ENV_INIT, T.AGENT_INIT):
            self.state = State.READY
        elif request_type in (T.ENV_START, T.AGENT_START):
            self.state = State.RUNNING
        elif request_type == T.ENV_STEP:
            terminal = type(reply_body) is list and len(reply_body) == 4 and reply_body[2] is True
            self.state = State.ENDED if terminal else State.RUNNING
        elif request_type == T.AGENT_END:
            self.state = State.ENDED
        elif request_type in (T.ENV_CLEANUP, T.AGENT_CLEANUP):
            self.state = State.CLEANED


class ProbeMaker:
    """Draws probes for one server from ``rng``; ``next_seq`` numbers every request."""

    def __init__(self, scenario: Scenario, rng: np.random.Generator):
        self.scenario = scenario
        self.rng = rng
        self.seq = 0
        self.episode = 1
        self.env = scenario.role == "environment"

    # -- helpers -----------------------------------------------------------------------
    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def envelope(
        self,
        msg_type: int,
        body=None,
        *,
        seq: int | None = None,
        episode: int | None = None,
        version: int = PROTOCOL_VERSION,
    ) -> list:
        return [
            version,
            msg_type,
            self.next_seq() if seq is None else seq,
            self.episode if episode is None else episode,
            body,
        ]

    def request(
        self,
        kind: str,
        msg_type: int,
        body=None,
        expect: Expect = Expect.REPLY,
        codes=frozenset(),
        extra_frames=(),
    ) -> Probe:
        frames = [pack(self.envelope(msg_type, body)), *extra_frames]
        return Probe(kind, frames, expect, frozenset(codes), int(msg_type))

    def error(self, kind: str, frames: list, codes=BAD_INPUT) -> Probe:
        return Probe(kind, frames, Expect.ERROR, frozenset(codes))

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    def action(self) -> list:
        low, high = self.scenario.action_range
        return [[int(self.rng.integers(low, high + 1))], [], "", []]

    def heartbeat(self) -> Probe:
        """The check after every bad input: a HEARTBEAT is echoed with its body."""
        return self.request("heartbeat", T.HEARTBEAT, int(self.rng.integers(1 << 31)))

    # -- valid requests ----------------------------------------------------------------
    def valid(self, model: StateModel) -> Probe:
        """The next request of a normal conversation in the model's state."""
        if self.rng.random() < 0.1:  # stateless requests, in order at any time
            return self.pick(
                [
                    lambda: self.request(
                        "valid hello",
                        T.HELLO,
                        ["experiment", PROTOCOL_VERSION, "faults", "python", ""],
                    ),
                    self.heartbeat,
                    lambda: self.request(
                        "valid message", T.ENV_MESSAGE if self.env else T.AGENT_MESSAGE, "hello"
                    ),
                    lambda: self.request(
                        "valid query",
                        T.ENV_QUERY if self.env else T.AGENT_QUERY,
                        [int(Query.SEED), None, int(self.rng.integers(1 << 31))],
                    ),
                ]
            )()
        s = model.state
        if self.env:
            if s in (State.NEW, State.CLEANED):
                return self.request("valid env_init", T.ENV_INIT)
            if s in (State.READY, State.ENDED):
                self.episode += s == State.ENDED
                return self.request("valid env_start", T.ENV_START)
            if self.rng.random() < 0.02:
                return self.request("valid env_cleanup", T.ENV_CLEANUP)
            # An in-range action may still be illegal in the state: INVALID_ACTION then.
            return self.request(
                "valid env_step", T.ENV_STEP, self.action(), codes={E.INVALID_ACTION}
            )
        observation = self.scenario.observation
        if s in (State.NEW, State.CLEANED):
            return self.request("valid agent_init", T.AGENT_INIT, self.scenario.task_spec)
        if s in (State.READY, State.ENDED):
            self.episode += s == State.ENDED
            return self.request("valid agent_start", T.AGENT_START, observation)
        roll = self.rng.random()
        if roll < 0.02:
            return self.request("valid agent_cleanup", T.AGENT_CLEANUP)
        if roll < 0.15:
            return self.request("valid agent_end", T.AGENT_END, float(self.rng.normal()))
        return self.request(
            "valid agent_step", T.AGENT_STEP, [float(self.rng.normal()), observation]
        )

    def before_init(self) -> list[Probe]:
        """Requests that need INIT (or START, or DELEGATE) first: WRONG_STATE (PROTOCOL.md §5)."""
        wrong = {E.WRONG_STATE}
        if self.env:
            return [
                self.request(
                    "env_start before env_init", T.ENV_START, expect=Expect.ERROR, codes=wrong
                ),
                self.request(
                    "env_step before env_init",
                    T.ENV_STEP,
                    self.action(),
                    expect=Expect.ERROR,
                    codes=wrong,
                ),
                self.request(
                    "run_episode before env_init",
                    T.RUN_EPISODE,
                    [0],
                    expect=Expect.ERROR,
                    codes=wrong,
                ),
            ]
        observation = self.scenario.observation
        return [
            self.request(
                "agent_start before agent_init",
                T.AGENT_START,
                observation,
                expect=Expect.ERROR,
                codes=wrong,
            ),
            self.request(
                "agent_step before agent_init",
                T.AGENT_STEP,
                [0.0, observation],
                expect=Expect.ERROR,
                codes=wrong,
            ),
            self.request(
                "agent_end before agent_init", T.AGENT_END, 0.0, expect=Expect.ERROR, codes=wrong
            ),
        ]

    def before_start(self) -> list[Probe]:
        """After ENV_INIT: the requests that need ENV_START or DELEGATE first."""
        if not self.env:
            return []
        wrong = {E.WRONG_STATE}
        return [
            self.request(
                "env_step before env_start",
                T.ENV_STEP,
                self.action(),
                expect=Expect.ERROR,
                codes=wrong,
            ),
            self.request(
                "run_episode before delegate", T.RUN_EPISODE, [0], expect=Expect.ERROR, codes=wrong
            ),
        ]

    def out_of_order(self, model: StateModel) -> Probe:
        """A valid request at a moment the protocol leaves open (RL_start mid-episode, ...)."""
        if self.env:
            msg_type, body = self.pick(
                [
                    (T.ENV_INIT, None),
                    (T.ENV_START, None),
                    (T.ENV_CLEANUP, None),
                    (T.ENV_STEP, self.action()),
                ]
            )
        else:
            msg_type, body = self.pick(
                [
                    (T.AGENT_INIT, self.scenario.task_spec),
                    (T.AGENT_START, self.scenario.observation),
                    (T.AGENT_END, 1.0),
                    (T.AGENT_CLEANUP, None),
                    (T.AGENT_STEP, [0.5, self.scenario.observation]),
                ]
            )
        name = f"{MessageType(msg_type).name.lower()} in state {model.state.name.lower()}"
        needs_start = T.ENV_STEP if self.env else None
        if (
            model.state == State.NEW
            and msg_type not in (T.ENV_INIT, T.AGENT_INIT, T.ENV_CLEANUP, T.AGENT_CLEANUP)
            or model.state == State.READY
            and msg_type == needs_start
        ):
            return self.request(name, msg_type, body, Expect.ERROR, {E.WRONG_STATE})
        return self.request(name, msg_type, body, Expect.EITHER)
