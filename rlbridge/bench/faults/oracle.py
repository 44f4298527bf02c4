"""The oracle of `rlbridge bench faults`: is a reply what PROTOCOL.md demands, and the tallies.

:func:`judge` checks one reply against its :class:`Probe`: a well-formed
envelope; the request's seq and episode repeated whenever they can be decoded
(PROTOCOL.md §2: clients drop replies with other seqs); the request's own type
for a valid request; an ERROR with one of the probe's codes, never APPLICATION,
for bad input; WRONG_STATE for a request out of order. A wrong reply gets a
class (the defect it shows) so that the report groups thousands of inputs
into a few findings, each with an example input.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

import msgpack

from rlbridge.bench.faults.inputs import Expect, Probe, decodable_ids
from rlbridge.protocol.errors import ErrorCode, ProtocolError
from rlbridge.protocol.messages import MessageType, decode

_CODES = frozenset(int(c) for c in ErrorCode)
_TYPES = frozenset(int(t) for t in MessageType)

# Classes of wrong replies, in the order the report lists them.
NO_WRONG_STATE = "out-of-order request not answered WRONG_STATE"
APPLICATION = "bad input answered APPLICATION"
ACCEPTED = "bad input accepted as valid"
OTHER_CODE = "bad input answered with another error code"
VALID_REFUSED = "valid request refused"
SEQ_ZERO = "error reply with seq/episode 0, not the request's"
SEQ_OTHER = "reply with another seq/episode than the request's"
MALFORMED_REPLY = "reply that is not a valid envelope"
DEAD_AFTER = "valid HEARTBEAT after a bad input not answered right"
EXPERIMENT = "experiment stopped by bad input to its servers"
NO_REPLY = "request left without a reply"


class Verdict(NamedTuple):
    kind: str  # "ok", "crash", "hang" or "wrong"
    detail: str = ""
    cls: str = ""  # the class of a wrong reply (one of the constants above), or of the failure
    reply_type: int = 0
    reply_body: object = None


def judge(probe: Probe, frames: list) -> Verdict:
    """The verdict on ``frames`` as the reply to ``probe``."""
    try:
        reply = decode(bytes(frames[0]), tuple(frames[1:]), max_bytes=1 << 62)
    except ProtocolError as err:
        return Verdict("wrong", f"malformed reply: {err}", MALFORMED_REPLY)
    problems: list[tuple[str, str]] = []
    if reply.type == MessageType.ERROR:
        problems += _error_problems(probe, reply.body)
    elif probe.expect == Expect.ERROR:
        cls = NO_WRONG_STATE if probe.codes == {ErrorCode.WRONG_STATE} else ACCEPTED
        problems.append(
            (
                cls,
                f"answered {_type_name(reply.type)} (body {_short(reply.body)}); "
                f"expected ERROR {_names(probe.codes)}",
            )
        )
    elif probe.request_type and reply.type != probe.request_type:
        problems.append(
            (
                MALFORMED_REPLY,
                f"answered {_type_name(reply.type)}; expected {_type_name(probe.request_type)}",
            )
        )
    elif probe.kind == "heartbeat":
        sent = msgpack.unpackb(probe.frames[0])[4]
        if reply.body != sent:
            problems.append((MALFORMED_REPLY, f"heartbeat echoed {reply.body!r}; sent {sent!r}"))
    ids = decodable_ids(bytes(probe.frames[0]))
    if ids is not None and (reply.seq, reply.episode) != ids:
        cls = SEQ_ZERO if (reply.seq, reply.episode) == (0, 0) else SEQ_OTHER
        problems.append(
            (
                cls,
                f"seq/episode of the reply {reply.seq}/{reply.episode}, of the "
                f"request {ids[0]}/{ids[1]}",
            )
        )
    if not problems:
        return Verdict("ok", "", "", reply.type, reply.body)
    return Verdict(
        "wrong", "; ".join(text for _, text in problems), problems[0][0], reply.type, reply.body
    )


def _error_problems(probe: Probe, body) -> list[tuple[str, str]]:
    if (
        type(body) is not list
        or len(body) != 2
        or type(body[0]) is not int
        or type(body[1]) is not str
    ):
        return [(MALFORMED_REPLY, f"ERROR body {_short(body)} is not [code, message]")]
    code, text = body
    if code not in _CODES:
        return [(MALFORMED_REPLY, f"unknown error code {code} ({text[:100]})")]
    if probe.expect == Expect.EITHER or (code in probe.codes and code != ErrorCode.APPLICATION):
        return []
    answered = f"answered ERROR {ErrorCode(code).name} ({text[:120]})"
    if probe.expect == Expect.REPLY:
        wanted = _type_name(probe.request_type) + (
            f" or ERROR {_names(probe.codes)}" if probe.codes else ""
        )
        cls = APPLICATION if code == ErrorCode.APPLICATION and probe.codes else VALID_REFUSED
        return [(cls, f"{answered}; expected {wanted}")]
    if probe.codes == {ErrorCode.WRONG_STATE}:
        cls = NO_WRONG_STATE
    else:
        cls = APPLICATION if code == ErrorCode.APPLICATION else OTHER_CODE
    return [(cls, f"{answered}; expected ERROR {_names(probe.codes)}")]


def _names(codes) -> str:
    return "/".join(sorted(ErrorCode(c).name for c in codes))


def _type_name(code: int) -> str:
    return MessageType(code).name if code in _TYPES else f"type {code}"


def _short(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_frames(frames: list) -> str:
    """A short, readable rendering of a request's frames for the report."""
    first = bytes(frames[0])
    try:
        shown = repr(msgpack.unpackb(first, strict_map_key=False))
    except Exception:  # not msgpack: show the bytes
        shown = f"bytes {first[:40].hex()}"
    if len(shown) > 150:
        shown = shown[:147] + "..."
    extra = f" + {len(frames) - 1} frames" if len(frames) > 1 else ""
    return f"{shown} ({len(first)} bytes){extra}"


@dataclass
class Tally:
    """Counts of one target (or of everything), and per failure class its inputs and examples."""

    inputs: int = 0
    crashes: int = 0
    hangs: int = 0
    wrong: int = 0
    lost: int = 0
    #: (class, target) -> count; (class, probe kind) -> count; class -> first example
    by_target: Counter = field(default_factory=Counter)
    by_kind: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)

    def note(self, target: str, probe: Probe, verdict: Verdict) -> None:
        if verdict.kind == "crash":
            self.crashes += 1
        elif verdict.kind == "hang":
            self.hangs += 1
        else:
            self.wrong += 1
        cls = verdict.cls or verdict.kind
        self.by_target[cls, target] += 1
        self.by_kind[cls, probe.kind] += 1
        self.examples.setdefault(
            (cls, target), f"input {describe_frames(probe.frames)}: {verdict.detail}"
        )

    def add(self, other: Tally) -> None:
        self.inputs += other.inputs
        self.crashes += other.crashes
        self.hangs += other.hangs
        self.wrong += other.wrong
        self.lost += other.lost
        self.by_target.update(other.by_target)
        self.by_kind.update(other.by_kind)
        for key, example in other.examples.items():
            self.examples.setdefault(key, example)

    @property
    def clean(self) -> bool:
        return not (self.crashes or self.hangs or self.wrong or self.lost)

    def report(self) -> list[str]:
        """Per failure class: its count, its targets, its kinds of input, an example per target."""
        classes: Counter[str] = Counter()
        for (cls, _), count in self.by_target.items():
            classes[cls] += count
        lines = []
        for cls, count in classes.most_common():
            targets = [(t, n) for (c, t), n in self.by_target.most_common() if c == cls]
            kinds = [(k, n) for (c, k), n in self.by_kind.most_common() if c == cls]
            lines.append(f"{count:6d}  {cls}")
            lines.append(
                "        inputs: "
                + ", ".join(f"{k} ({n})" for k, n in kinds[:8])
                + (", ..." if len(kinds) > 8 else "")
            )
            for target, n in targets:
                lines.append(f"        {target} ({n}), e.g. {self.examples[cls, target]}")
        return lines
