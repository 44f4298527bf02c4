"""Processes on the network: transport, the environment and agent servers, the remote
proxies, the delegated episode, CURVE security, and the over-protocol environment check."""
