"""RL-Glue 3.0 compatibility: the `rlbridge glue` server, its sessions and legacy peers,
the adapters between legacy programs and native processes, and their commands."""
