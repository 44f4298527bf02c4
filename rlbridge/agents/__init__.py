"""Agents: the Agent contract, AgentBatch and the generic agents (random, first-legal); each
game's own agents live in its folder, ``rlbridge/games/<game>/agents/``."""
