"""`rlbridge sweep`: a grid of full experiments run as Ray tasks, and its report (docs/sweeps.md).

* :mod:`~rlbridge.sweep.grid`: the grid (games x agents x options x seeds) from a TOML
  file or the command line, and each trial's stable id;
* :mod:`~rlbridge.sweep.trial`: one trial, in a Ray worker: one CPU claimed, one
  `rlbridge run` on it;
* :mod:`~rlbridge.sweep.runner`: Ray, the results file, resuming and retrying;
* :mod:`~rlbridge.sweep.report` and :mod:`~rlbridge.sweep.plots`: tables and curves.
"""
