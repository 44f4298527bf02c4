"""Blackjack agents.

Registered agents: :mod:`.mc` (``blackjack-mc-eval``, ``-mc-es``, ``-mc-onpolicy``) and
:mod:`.offpolicy` (``blackjack-mc-offpolicy-eval``, ``-mc-offpolicy``). Libraries: :mod:`.dp`
(exact evaluation and the optimal policy) and :mod:`.plots` (the seed's heatmaps as PNG).
An agent's tables rebuilt from a run's log, for `rlbridge sweep report`, are sweep tooling:
:mod:`rlbridge.sweep.blackjack`.
"""
