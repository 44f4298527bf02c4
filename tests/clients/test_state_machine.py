"""The Python, C and JavaScript agent servers against PROTOCOL.md's agent rules, over a raw
DEALER socket.

Every cell of the agent state table (state x request type -> reply and next state) is kept
here as data and driven against the real agent processes of all three languages, then the
envelope rules: the order of checks, ERROR replies that echo seq and episode, the frame bound,
REQ clients, array shape limits, HELLO roles, seed messages and the one-experiment-at-a-time
session.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

import msgpack
import pytest
import zmq

from rlbridge.protocol.vectors import load_vectors

from .helpers import agent_command, build_c, check_js, start, stop
from .wire import (
    BATCHED,
    BATCHED_TYPES,
    BATCHING,
    BODIES,
    COUNTDOWN_SPEC,
    ENDED,
    FRESH,
    LANGUAGES,
    OBSERVATION,
    OK,
    READY,
    RUNNING,
    SEED_MESSAGES,
    SEED_QUERIES,
    SETUP,
    STATES,
    Client,
    E,
    T,
    V,
    enter,
    observable,
    outcome,
    reset,
    state_of,
    states_of,
)

WS = E.WRONG_STATE
Cell = tuple[object, str]
#: PROTOCOL.md section 12's agent table (and AGENT_ALLOWED with next_agent_state in
#: rlbridge/protocol/states.py): request -> (reply, next state) in FRESH, READY, RUNNING,
#: ENDED and BATCHED. A reply is OK or the ERROR code; an ERROR leaves the state as it was.
#: SHUTDOWN (OK in every state) stops the process: test_shutdown_is_served_in_every_state
#: covers it.
AGENT_TABLE: dict[int, tuple[Cell, Cell, Cell, Cell, Cell]] = {
    #                    FRESH          READY          RUNNING         ENDED          BATCHED
    T.HELLO: ((OK, FRESH), (OK, READY), (OK, RUNNING), (OK, ENDED), (OK, BATCHED)),
    T.HEARTBEAT: ((OK, FRESH), (OK, READY), (OK, RUNNING), (OK, ENDED), (OK, BATCHED)),
    T.AGENT_INIT: ((OK, READY), (OK, READY), (OK, READY), (OK, READY), (OK, READY)),
    T.AGENT_BATCH_INIT: ((OK, BATCHED), (OK, BATCHED), (OK, BATCHED), (OK, BATCHED), (OK, BATCHED)),
    T.AGENT_START: ((WS, FRESH), (OK, RUNNING), (OK, RUNNING), (OK, RUNNING), (WS, BATCHED)),
    # In ENDED: RL-Glue 3.0.4's RL_step after a terminal step, with no RL_start between.
    T.AGENT_STEP: ((WS, FRESH), (WS, READY), (OK, RUNNING), (OK, RUNNING), (WS, BATCHED)),
    T.AGENT_END: ((WS, FRESH), (WS, READY), (OK, ENDED), (OK, ENDED), (WS, BATCHED)),
    T.AGENT_CLEANUP: ((WS, FRESH), (OK, FRESH), (OK, FRESH), (OK, FRESH), (OK, FRESH)),
    T.AGENT_MESSAGE: ((OK, FRESH), (OK, READY), (OK, RUNNING), (OK, ENDED), (OK, BATCHED)),
    T.AGENT_BATCH_STEP: ((WS, FRESH), (WS, READY), (WS, RUNNING), (WS, ENDED), (OK, BATCHED)),
    # No role but the environment's serves these, and no role at all serves ERROR.
    **{
        t: ((WS, FRESH), (WS, READY), (WS, RUNNING), (WS, ENDED), (WS, BATCHED))
        for t in (
            T.ERROR,
            T.ENV_INIT,
            T.ENV_START,
            T.ENV_STEP,
            T.ENV_CLEANUP,
            T.ENV_MESSAGE,
            T.ENV_BATCH_INIT,
            T.ENV_BATCH_STEP,
            T.RUN_EPISODE,
            T.DELEGATE,
            T.RUN_BATCH,
        )
    },
}


def expected_cell(language: str, msg_type: int, state: str) -> Cell:
    """The table's cell; an agent that does not batch answers the batched types UNKNOWN_TYPE
    (PROTOCOL.md section 16) and stays where it was."""
    if language not in BATCHING and msg_type in BATCHED_TYPES:
        return E.UNKNOWN_TYPE, state
    return AGENT_TABLE[msg_type][STATES.index(state)]


LANGUAGE_STATES = [(language, state) for language in LANGUAGES for state in states_of(language)]


@pytest.mark.parametrize("language", [lang for lang in LANGUAGES if lang not in BATCHING])
def test_an_agent_that_does_not_batch_answers_the_batched_types_unknown_type(language, agents):
    """PROTOCOL.md section 16: it knows their codes (its decoder reads every vector) and answers
    as if it did not, before the role, the size or the body; the vectors hold its answer."""
    vector = next(
        v for v in load_vectors()["batch"]["messages"] if v["name"] == "error_does_not_batch"
    )
    client = Client(agents[language])
    try:
        reply = client.request(T.AGENT_BATCH_INIT, BODIES[T.AGENT_BATCH_INIT], seq=1, episode=0)
        assert msgpack.packb(reply) == bytes.fromhex(vector["hex"])
        for msg_type in BATCHED_TYPES:  # an environment's types too, and bodies of any form
            for body in (BODIES[msg_type], 5, "x" * 200_000):
                reply = client.request(msg_type, body, seq=2, episode=3)
                assert reply[:4] == [V, T.ERROR, 2, 3] and reply[4][0] == E.UNKNOWN_TYPE, reply
    finally:
        client.close()


@pytest.fixture(scope="module")
def directory() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="rlbsm-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def agents(directory) -> Iterator[dict[str, str]]:
    """One `first` agent per language, shared by the tests that leave no session behind."""
    build_c()
    check_js()
    addresses = {language: f"ipc://{directory}/shared-{language}" for language in LANGUAGES}
    # Their stderr (a line per refused request) is never read: a pipe would fill and block them.
    children = [
        start(agent_command(language, "first", address), stderr=subprocess.DEVNULL)
        for language, address in addresses.items()
    ]
    yield addresses
    stop(children)


def own_agent(directory: str, language: str, name: str, *extra: str):
    if language == "c":
        build_c()
    address = f"ipc://{directory}/{name}-{language}"
    return address, start(
        agent_command(language, "first", address, *extra), stderr=subprocess.DEVNULL
    )


@pytest.mark.parametrize("language, state", LANGUAGE_STATES)
def test_every_cell_of_the_agent_state_table(language, state, agents):
    client = Client(agents[language])
    wrong = []
    try:
        for msg_type in AGENT_TABLE:
            enter(client, state)
            reply = client.request(msg_type, BODIES[msg_type], seq=40 + msg_type, episode=3)
            assert reply[2:4] == [40 + msg_type, 3], reply  # every reply echoes seq and episode
            expected_reply, expected_state = expected_cell(language, msg_type, state)
            got = (outcome(reply, msg_type), state_of(client))
            if got != (expected_reply, observable(expected_state)):
                wrong.append(
                    f"{T(msg_type).name} in {state}: expected "
                    f"{(expected_reply, expected_state)}, got {got} ({reply[4]!r:.200})"
                )
    finally:
        reset(client)
        client.close()
    assert not wrong, "\n".join(wrong)


#: A body of the wrong form for each agent request: BAD_FIELD in every state.
BAD_BODIES = {
    T.AGENT_INIT: 5,
    T.AGENT_START: [1, 2],
    T.AGENT_STEP: [0.5],
    T.AGENT_END: "x",
    T.AGENT_CLEANUP: 0,
    T.AGENT_MESSAGE: [],
    T.HELLO: ["agent", "1", "x", "y"],
    T.AGENT_BATCH_INIT: [COUNTDOWN_SPEC, 0],
    T.AGENT_BATCH_STEP: [0],
}


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_failed_request_leaves_the_state_as_it_was(language, agents):
    client = Client(agents[language])
    wrong = []
    try:
        for state in states_of(language):
            for msg_type, body in BAD_BODIES.items():
                enter(client, state)
                got = (outcome(client.request(msg_type, body), msg_type), state_of(client))
                code = (
                    E.BAD_FIELD
                    if expected_cell(language, msg_type, state)[0] != E.UNKNOWN_TYPE
                    else E.UNKNOWN_TYPE
                )
                if got != (code, observable(state)):
                    wrong.append(
                        f"bad {T(msg_type).name} in {state}: expected {code.name}, "
                        f"{observable(state)}; got {got}"
                    )
    finally:
        reset(client)
        client.close()
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("language", LANGUAGES)
def test_shutdown_is_served_in_every_state(language, directory):
    for state in states_of(language):
        address, child = own_agent(directory, language, f"shutdown-{state}")
        client = Client(address)
        try:
            for setup in SETUP[state]:
                client.call(setup, BODIES[setup])
            assert client.request(T.SHUTDOWN, "done", seq=9, episode=2) == [
                V,
                T.SHUTDOWN,
                9,
                2,
                None,
            ]
            assert child.wait(timeout=20) == 0
        finally:
            client.close()
            stop([child])


#: (name, first frame, expected code, seq and episode echoed): D1's order and D2's echo.
ENVELOPES = [
    ("not msgpack", b"\xc1", E.MALFORMED, False),
    ("a str, not an envelope", msgpack.packb("abc"), E.MALFORMED, False),
    ("4 items", msgpack.packb([V, 20, 7, 3]), E.MALFORMED, False),
    ("trailing bytes", msgpack.packb([V, 1, 7, 3, None]) + b"\x00", E.MALFORMED, False),
    ("a str seq", msgpack.packb([V, 20, "7", 3, None]), E.BAD_FIELD, False),
    ("a float episode", msgpack.packb([V, 20, 7, 3.0, None]), E.BAD_FIELD, False),
    ("a str version", msgpack.packb(["1", 20, 7, 3, None]), E.BAD_FIELD, True),
    ("a float version", msgpack.packb([1.0, 20, 7, 3, None]), E.BAD_FIELD, True),
    ("a list type", msgpack.packb([V, [20], 7, 3, None]), E.BAD_FIELD, True),
    ("version 1 of an unknown type", msgpack.packb([1, 99, 7, 3, None]), E.VERSION_MISMATCH, True),
    (
        "a version 1 HELLO",
        msgpack.packb([1, 1, 7, 3, ["experiment", 1, "old", "python"]]),
        E.VERSION_MISMATCH,
        True,
    ),
    (
        "a version 2 HELLO",
        msgpack.packb([2, 1, 7, 3, ["experiment", 2, "old", "python"]]),
        E.VERSION_MISMATCH,
        True,
    ),
    ("an unknown type", msgpack.packb([V, 99, 7, 3, None]), E.UNKNOWN_TYPE, True),
    ("ERROR as a request", msgpack.packb([V, 2, 7, 3, [10, "x"]]), E.WRONG_STATE, True),
    ("an environment request", msgpack.packb([V, 12, 7, 3, None]), E.WRONG_STATE, True),
    ("an int task spec", msgpack.packb([V, 20, 7, 3, 5]), E.BAD_FIELD, True),
    ("a bad step body before the state", msgpack.packb([V, 22, 7, 3, 5]), E.BAD_FIELD, True),
    ("a body on AGENT_CLEANUP", msgpack.packb([V, 24, 7, 3, 0]), E.BAD_FIELD, True),
    ("a list body on SHUTDOWN", msgpack.packb([V, 4, 7, 3, []]), E.BAD_FIELD, True),
    ("a list message", msgpack.packb([V, 25, 7, 3, []]), E.BAD_FIELD, True),
    ("a seq past int64", msgpack.packb([V, 20, 2**64 - 1, 3, None]), E.BAD_FIELD, False),
    ("too many bytes", msgpack.packb([V, 25, 7, 3, "x" * 100001]), E.TOO_LARGE, True),
    (
        "too many bytes of an unknown type",
        msgpack.packb([V, 99, 7, 3, "x" * 100001]),
        E.UNKNOWN_TYPE,
        True,
    ),
]


@pytest.mark.parametrize("language", LANGUAGES)
def test_checks_follow_protocol_order_and_errors_echo_seq_and_episode(language, directory):
    address, child = own_agent(directory, language, "envelopes", "--max-message-bytes", "100000")
    client = Client(address)
    wrong = []
    try:
        for name, frame, code, echoed in ENVELOPES:
            reply = client.ask(frame)
            expected = [V, T.ERROR, 7, 3] if echoed else [V, T.ERROR, 0, 0]
            if reply[:4] != expected or reply[4][0] != code:
                wrong.append(f"{name}: expected {expected} {code.name}, got {reply!r:.200}")
        assert client.request(T.HEARTBEAT, [1], seq=8, episode=5) == [V, T.HEARTBEAT, 8, 5, [1]]
        for seq, episode in ((2**63 - 1, -(2**63)), (2**53 + 1, 2**32)):  # int64 ends, and past
            reply = client.ask(msgpack.packb(["1", 20, seq, episode, None]))  # JS's exact ints
            assert reply[:4] == [V, T.ERROR, seq, episode], reply
            assert client.request(T.HEARTBEAT, [1], seq=seq, episode=episode)[2:4] == [seq, episode]
    finally:
        client.close()
        stop([child])
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("language", LANGUAGES)
def test_more_than_1024_frames_is_too_large_and_the_agent_keeps_serving(language, agents):
    client = Client(agents[language])
    head = msgpack.packb([V, T.AGENT_QUERY, 12, 4, [1, None, 5]])
    try:
        # The envelope and 1023 more frames: within the bound.
        assert client.ask(head, *[b""] * 1023) == [V, T.AGENT_QUERY, 12, 4, None]
        reply = client.ask(head, *[b""] * 1024)
        assert reply[:4] == [V, T.ERROR, 12, 4] and reply[4][0] == E.TOO_LARGE, reply
        assert "1025 frames" in reply[4][1]
        reply = client.ask(head, *[b"x"] * 100_000)
        assert reply[:4] == [V, T.ERROR, 12, 4] and reply[4][0] == E.TOO_LARGE, reply
        assert client.request(T.HEARTBEAT, [2], seq=13) == [V, T.HEARTBEAT, 13, 1, [2]]
    finally:
        client.close()


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_req_client_gets_its_delimiter_back(language, agents):
    req = Client(agents[language], zmq.REQ)
    dealer = Client(agents[language])
    try:
        assert req.request(T.HELLO, BODIES[T.HELLO], seq=21)[:4] == [V, T.HELLO, 21, 1]
        assert req.ask(b"\xc1")[:4] == [V, T.ERROR, 0, 0]  # errors too
        assert req.request(T.AGENT_QUERY, [1, None, 1], seq=22) == [V, T.AGENT_QUERY, 22, 1, None]
        # What a REQ socket sends, by hand: the reply starts with the empty delimiter too.
        reply = dealer.frames(b"", msgpack.packb([V, T.HEARTBEAT, 23, 1, [7]]))
        assert reply[0] == b"" and msgpack.unpackb(reply[1]) == [V, T.HEARTBEAT, 23, 1, [7]]
    finally:
        req.close()
        dealer.close()


def observation_with(shape: list[int], data: bytes = b"") -> list:
    return [[4], [], "", [["|u1", shape, data]]]


@pytest.mark.parametrize("language", LANGUAGES)
def test_array_shapes_are_bounded(language, agents):
    client = Client(agents[language])
    try:
        client.call(T.AGENT_INIT, COUNTDOWN_SPEC)
        bad = [
            [1] * 33,  # more than 32 dimensions
            [2**31, 2**31, 2],  # 2**63 bytes
            [2**62, 2],
            [0, 2**40, 2**30],  # zero dimensions do not hide the rest
            [2**64 - 1, 2**64 - 1],  # products that overflow 64 bits
        ]
        for shape in bad:
            reply = client.request(T.AGENT_START, observation_with(shape))
            assert reply[1] == T.ERROR and reply[4][0] == E.BAD_FIELD, (shape, reply)
        for shape, data in (([1] * 32, b"\x01"), ([0, 2**40], b""), ([2, 3], bytes(6))):
            reply = client.request(T.AGENT_START, observation_with(shape, data))
            assert reply[1] == T.AGENT_START, (shape, reply)
    finally:
        reset(client)
        client.close()


@pytest.mark.parametrize("language", LANGUAGES)
def test_hello_is_optional_and_checks_the_role(language, agents):
    client = Client(agents[language])
    try:
        # Served without any HELLO first.
        assert client.request(T.AGENT_MESSAGE, "x", seq=2) == [V, T.AGENT_MESSAGE, 2, 1, ""]
        for role, expected in (
            ("experiment", OK),
            ("environment", OK),
            ("agent", E.WRONG_STATE),
            ("robot", E.BAD_FIELD),
        ):
            reply = client.request(T.HELLO, [role, V, "test", "python", ""], seq=3)
            assert outcome(reply, T.HELLO) == expected, (role, reply)
            assert reply[2:4] == [3, 1]
        for version in (1, V - 1, V + 1, -1):
            reply = client.request(T.HELLO, ["experiment", version, "test", "python", ""])
            assert outcome(reply, T.HELLO) == E.VERSION_MISMATCH, (version, reply)
        # Fields of the wrong type are BAD_FIELD before the role or the version is looked at.
        for body in (
            ["agent", "1", "x", "y", ""],
            ["agent", 1, 2, 3, ""],
            ["experiment", 1, "x", None, ""],
            ["experiment", 1.0, "x", "y", ""],
            ["experiment", V, "x", "y", None],
            ["experiment", V, "x", "y"],  # a version-2 body: no name
            ["experiment", 1, "x"],
            "experiment",
        ):
            assert outcome(client.request(T.HELLO, body), T.HELLO) == E.BAD_FIELD, body
    finally:
        client.close()


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_version_1_peer_is_refused_with_the_same_text_in_every_language(language, agents):
    """PROTOCOL.md section 5: a version-1 envelope, or a HELLO that names version 1, is
    VERSION_MISMATCH with one text that says what to do."""
    client = Client(agents[language])
    advice = (
        f"; this implementation speaks only version {V} (PROTOCOL.md's changelog says "
        "what changed): run peers of the same protocol version"
    )
    try:
        reply = client.ask(msgpack.packb([1, T.HELLO, 4, 0, ["experiment", 1, "old", "c", ""]]))
        assert reply == [
            V,
            T.ERROR,
            4,
            0,
            [E.VERSION_MISMATCH, f"protocol version mismatch: expected {V}, got 1{advice}"],
        ]
        reply = client.request(T.HELLO, ["experiment", 1, "rlbridge-0.1", "python", ""], seq=5)
        assert reply == [
            V,
            T.ERROR,
            5,
            1,
            [
                E.VERSION_MISMATCH,
                f"protocol version mismatch: expected {V}, got 1 in the HELLO of "
                f"rlbridge-0.1{advice}",
            ],
        ]
    finally:
        client.close()


@pytest.mark.parametrize("language", LANGUAGES)
def test_seeding_is_the_typed_query_and_seed_text_is_the_users(language, agents):
    client = Client(agents[language])
    wrong = []
    try:
        for text, expected in SEED_MESSAGES:
            got = client.request(T.AGENT_MESSAGE, text)[4]
            if got != expected:
                wrong.append(f"{text[:40]!r}: expected {expected[:90]!r}, got {got[:90]!r}")
        for body, code in SEED_QUERIES:
            reply = client.request(T.AGENT_QUERY, body)
            got = reply[4][0] if reply[1] == T.ERROR else None
            if got != code:
                wrong.append(f"AGENT_QUERY {body!r:.60}: expected {code!r}, got {reply[4]!r:.90}")
    finally:
        client.close()
    assert not wrong, "\n".join(wrong)


def busy(reply: list, refused_type: T, init_type: T = T.AGENT_INIT) -> bool:
    """Whether ``reply`` is PROTOCOL.md section 13's refusal of ``refused_type`` from a client
    other than the owner of a session that ``init_type`` started."""
    if refused_type in (T.AGENT_INIT, T.AGENT_BATCH_INIT):
        text = (
            rf"this agent already serves an experiment \(session started by {init_type.name} "
            r"\d+ s ago\); start another agent process for a second experiment"
        )
    else:
        stop = r" \(or stop the process with SIGTERM\)" if refused_type == T.SHUTDOWN else ""
        text = (
            r"this agent serves another client's experiment \(session started by "
            rf"{init_type.name} \d+ s ago\); only that client may send {refused_type.name}" + stop
        )
    return (
        reply[1] == T.ERROR
        and reply[4][0] == E.WRONG_STATE
        and re.fullmatch(text, reply[4][1]) is not None
    )


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_second_experiment_is_refused_at_agent_init_while_a_session_is_active(
    language, directory
):
    address, child = own_agent(directory, language, "sessions")
    first, second = Client(address), Client(address)
    try:
        first.call(T.AGENT_INIT, COUNTDOWN_SPEC)
        reply = second.request(T.AGENT_INIT, COUNTDOWN_SPEC, seq=5, episode=2)
        assert reply[:4] == [V, T.ERROR, 5, 2] and busy(reply, T.AGENT_INIT), reply
        # A bad body is still BAD_FIELD: body fields come before the state.
        assert second.request(T.AGENT_INIT, 5)[4][0] == E.BAD_FIELD
        # Every other request is served: the delegated environment calls the agent this way.
        assert second.call(T.HELLO, ["environment", V, "test", "python", ""])
        assert second.call(T.AGENT_START, OBSERVATION)[4] == [[0], [], "", []]
        assert second.call(T.AGENT_END, 0.0)
        # The owner may init again; its cleanup ends the session and another may start one.
        first.call(T.AGENT_INIT, COUNTDOWN_SPEC)
        first.call(T.AGENT_CLEANUP)
        second.call(T.AGENT_INIT, COUNTDOWN_SPEC)
        assert busy(first.request(T.AGENT_INIT, COUNTDOWN_SPEC), T.AGENT_INIT)
        # The owner's cleanup ends its session; the other client may then start one.
        second.call(T.AGENT_CLEANUP)
        first.call(T.AGENT_INIT, COUNTDOWN_SPEC)
        first.call(T.AGENT_CLEANUP)
    finally:
        first.close()
        second.close()
        stop([child])


@pytest.mark.parametrize("language", LANGUAGES)
def test_only_the_sessions_owner_may_clean_up_or_stop_the_agent(language, directory):
    """PROTOCOL.md section 13: another client's AGENT_CLEANUP would reset the owner's agent in
    the middle of its episode, and its SHUTDOWN would stop it; both are refused, and the
    owner's episode goes on."""
    address, child = own_agent(directory, language, "owner-only")
    owner, stranger = Client(address), Client(address)
    try:
        owner.call(T.AGENT_INIT, COUNTDOWN_SPEC)
        owner.call(T.AGENT_START, OBSERVATION)
        # A body of the wrong form is BAD_FIELD from anyone: the body comes first.
        assert stranger.request(T.AGENT_CLEANUP, 0)[4][0] == E.BAD_FIELD
        for refused in (T.AGENT_CLEANUP, T.SHUTDOWN):
            reply = stranger.request(
                refused, "stop" if refused == T.SHUTDOWN else None, seq=6, episode=4
            )
            assert reply[2:4] == [6, 4] and busy(reply, refused), reply
        vectors = {v["name"]: v for v in load_vectors()["messages"]}
        for name, refused in (
            ("error_not_owner", T.AGENT_CLEANUP),
            ("error_second_session", T.AGENT_INIT),
        ):
            assert busy(msgpack.unpackb(bytes.fromhex(vectors[name]["hex"])), refused), name
        assert owner.call(T.AGENT_STEP, BODIES[T.AGENT_STEP])[4] == [[0], [], "", []]
        assert owner.call(T.AGENT_END, 1.0)
        owner.call(T.AGENT_CLEANUP)
        # The session was the owner's, not the first client's: the roles turn with it.
        stranger.call(T.AGENT_INIT, COUNTDOWN_SPEC)
        assert busy(owner.request(T.AGENT_CLEANUP), T.AGENT_CLEANUP)
        stranger.call(T.AGENT_CLEANUP)
        owner.call(T.AGENT_INIT, COUNTDOWN_SPEC)
        stranger_again = Client(address)
        try:
            assert busy(stranger_again.request(T.SHUTDOWN, "stop"), T.SHUTDOWN)
        finally:
            stranger_again.close()
        owner.call(T.AGENT_CLEANUP)
        # With no session, anyone may stop it.
        assert stranger.request(T.SHUTDOWN, "done") == [V, T.SHUTDOWN, 1, 1, None]
        assert child.wait(timeout=20) == 0
    finally:
        owner.close()
        stranger.close()
        stop([child])


@pytest.mark.parametrize("language", BATCHING)
def test_agent_batch_init_starts_and_claims_a_session_as_agent_init_does(language, directory):
    address, child = own_agent(directory, language, "batch-sessions")
    owner, stranger = Client(address), Client(address)
    try:
        owner.call(T.AGENT_BATCH_INIT, BODIES[T.AGENT_BATCH_INIT])
        assert busy(
            stranger.request(T.AGENT_INIT, COUNTDOWN_SPEC), T.AGENT_INIT, T.AGENT_BATCH_INIT
        )
        assert busy(
            stranger.request(T.AGENT_BATCH_INIT, BODIES[T.AGENT_BATCH_INIT]),
            T.AGENT_BATCH_INIT,
            T.AGENT_BATCH_INIT,
        )
        assert busy(stranger.request(T.AGENT_CLEANUP), T.AGENT_CLEANUP, T.AGENT_BATCH_INIT)
        # The delegated environment's batched steps come from its own identity.
        assert stranger.call(T.AGENT_BATCH_STEP, BODIES[T.AGENT_BATCH_STEP])
        owner.call(T.AGENT_CLEANUP)
        stranger.call(T.AGENT_BATCH_INIT, BODIES[T.AGENT_BATCH_INIT])
        stranger.call(T.AGENT_CLEANUP)
    finally:
        owner.close()
        stranger.close()
        stop([child])


def nested(depth: int) -> bytes:
    """A body of ``depth`` arrays around one str (msgpack's packer stops far earlier)."""
    return b"\x91" * depth + b"\xa1x"


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_body_nested_too_deep_is_malformed_and_the_agent_keeps_serving(language, agents):
    client = Client(agents[language])
    # Seq and episode are echoed whenever the receiver can read them (PROTOCOL.md section 5):
    # C and JS read the header from the bytes; Python's msgpack reader stops at 1024 levels,
    # before it has the envelope at all.
    ids = [0, 0] if language == "python" else [7, 3]
    try:
        for msg_type in (T.HEARTBEAT, T.AGENT_MESSAGE, T.AGENT_START):
            reply = client.ask(
                b"\x95" + bytes([V]) + bytes([msg_type]) + b"\x07\x03" + nested(2000)
            )
            assert reply[:4] == [V, T.ERROR, *ids] and reply[4][0] == E.MALFORMED, reply
        # Header fields nested deeper than a reader's limit are still the header's errors.
        reply = client.ask(b"\x95" + bytes([V]) + nested(200) + b"\x07\x03\xc0")
        assert reply[:4] == [V, T.ERROR, 7, 3] and reply[4][0] == E.BAD_FIELD, reply
        assert client.request(T.HEARTBEAT, [2], seq=13) == [V, T.HEARTBEAT, 13, 1, [2]]
    finally:
        client.close()


def test_javascript_bodies_nest_at_most_100_deep(agents):
    """The JS decoder reads any depth, its encoder only 100: deeper is MALFORMED at once,
    never APPLICATION from echoing a HEARTBEAT."""
    client = Client(agents["javascript"])
    head = b"\x95" + bytes([V]) + bytes([T.HEARTBEAT]) + b"\x07\x03"
    try:
        reply = client.ask(head + nested(100))
        assert reply[:4] == [V, T.HEARTBEAT, 7, 3], reply
        for depth in (101, 5000):
            reply = client.ask(head + nested(depth))
            assert reply[:4] == [V, T.ERROR, 7, 3] and reply[4][0] == E.MALFORMED, reply
            assert "more than 100 deep" in reply[4][1], reply
    finally:
        client.close()
