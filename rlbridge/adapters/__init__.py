"""Adapters between rlbridge and other RL libraries: Gymnasium (``gym``) and PettingZoo
(``pettingzoo``). Each imports its library on first use and names the extra that installs it."""
