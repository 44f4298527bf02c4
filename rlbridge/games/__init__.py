"""The built-in games, one folder each: core, environment, batch core, drawing, agents,
weights and README."""
