"""The glue: the Experiment API, transports, process runner and message log."""
