"""Benchmarks behind `make bench` and `rlbridge bench`: measured figures with same-run baselines."""
