"""numpy's ``SeedSequence(entropy).generate_state(n)`` in plain Python, for the protocol's seeds.

PROTOCOL.md ("Seeding", 16.5) defines the peers' and the instances' seeds as words of
numpy's SeedSequence. Every experiment derives its peers' seeds this way, so computing
them with numpy would load numpy (about 0.18 s of CPU) into processes that use no array.
This is the same algorithm (numpy/random/bit_generator.pyx: the default pool of four
32-bit words, ``hashmix`` and ``mix``, no spawn key), for non-negative int entropy or a
sequence of them. tests/protocol/test_seeds.py holds it equal to numpy's.
"""

from __future__ import annotations

from collections.abc import Sequence

_MASK32 = 0xFFFFFFFF
_POOL_SIZE = 4
_INIT_A = 0x43B0D7E5
_MULT_A = 0x931E8875
_INIT_B = 0x8B51F9DD
_MULT_B = 0x58F38DED
_MIX_MULT_L = 0xCA01F9DD
_MIX_MULT_R = 0x4973F715
_XSHIFT = 16


def _words(entropy: int | Sequence[int]) -> list[int]:
    """The entropy as 32-bit words, least significant first, as numpy coerces it."""
    if isinstance(entropy, int):
        if entropy < 0:
            raise ValueError(f"seed must be an int >= 0; got {entropy}")
        words = [entropy & _MASK32]
        entropy >>= 32
        while entropy:
            words.append(entropy & _MASK32)
            entropy >>= 32
        return words
    return [word for part in entropy for word in _words(part)]


def seed_words(entropy: int | Sequence[int], count: int) -> list[int]:
    """``SeedSequence(entropy).generate_state(count)`` (uint32 words) as Python ints."""
    words = _words(entropy)
    # hashmix's inputs in the order numpy's mix_entropy takes them: the pool's first fill,
    # then, per (source, target) pair, the source's word as it is at that moment, then
    # each further entropy word against every pool word. Written out flat, without a
    # call per hashmix: a batch seeds each of its instances this way.
    pool = [0] * _POOL_SIZE
    hash_const = _INIT_A
    for target in range(_POOL_SIZE):
        value = (words[target] if target < len(words) else 0) ^ hash_const
        hash_const = (hash_const * _MULT_A) & _MASK32
        value = (value * hash_const) & _MASK32
        pool[target] = value ^ (value >> _XSHIFT)
    pairs = [(s, t) for s in range(_POOL_SIZE) for t in range(_POOL_SIZE) if s != t]
    pairs += [(-1 - i, t) for i in range(len(words) - _POOL_SIZE) for t in range(_POOL_SIZE)]
    for source, target in pairs:
        value = (pool[source] if source >= 0 else words[_POOL_SIZE - 1 - source]) ^ hash_const
        hash_const = (hash_const * _MULT_A) & _MASK32
        value = (value * hash_const) & _MASK32
        value ^= value >> _XSHIFT
        result = (_MIX_MULT_L * pool[target] - _MIX_MULT_R * value) & _MASK32
        pool[target] = result ^ (result >> _XSHIFT)
    out = []
    hash_const = _INIT_B
    for index in range(count):
        value = pool[index % _POOL_SIZE] ^ hash_const
        hash_const = (hash_const * _MULT_B) & _MASK32
        value = (value * hash_const) & _MASK32
        out.append(value ^ (value >> _XSHIFT))
    return out
