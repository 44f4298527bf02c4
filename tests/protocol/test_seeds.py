"""protocol/seeds.py against numpy's own SeedSequence: the peers' and instances' seeds
(PROTOCOL.md "Seeding", 16.5) must not change when their computation leaves numpy."""

from __future__ import annotations

import random

import numpy as np
import pytest

from rlbridge.protocol.instances import derive_seeds, instance_seed
from rlbridge.protocol.seeds import seed_words

#: Edges (0, word boundaries, the largest seed a SEED query carries, more than four words,
#: which numpy mixes in after the pool) and seeded random ints of every width up to 160 bits.
_RANDOM = random.Random(20261128)
ENTROPIES = [0, 1, 2**32 - 1, 2**32, 2**64 - 1, 2**128 + 3, 2**160 - 1] + [
    _RANDOM.getrandbits(_RANDOM.randint(1, 160)) for _ in range(300)
]


@pytest.mark.parametrize("count", [1, 2, 5, 9])
def test_seed_words_are_numpys_words_for_an_int(count):
    for entropy in ENTROPIES:
        expected = np.random.SeedSequence(entropy).generate_state(count).tolist()
        assert seed_words(entropy, count) == expected, entropy


def test_seed_words_are_numpys_words_for_a_seed_and_an_instance():
    for entropy in ENTROPIES:
        instance = _RANDOM.randint(0, 1 << 20)
        expected = np.random.SeedSequence([entropy, instance]).generate_state(2).tolist()
        assert seed_words([entropy, instance], 2) == expected, (entropy, instance)


def test_derive_and_instance_seeds_keep_their_values():
    # The values numpy gave before the protocol computed them itself (PROTOCOL.md).
    assert derive_seeds(0) == tuple(np.random.SeedSequence(0).generate_state(2).tolist())
    assert instance_seed(7, 0) == 7
    assert instance_seed(7, 3) == int(np.random.SeedSequence([7, 3]).generate_state(1)[0])


def test_a_negative_seed_is_refused_as_numpy_refuses_it():
    with pytest.raises(ValueError, match=">= 0; got -1"):
        seed_words(-1, 1)
