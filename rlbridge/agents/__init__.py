"""Agents: the Agent contract and the built-in agents."""
