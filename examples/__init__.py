"""Small examples from the README, runnable with `rlbridge run examples.guess:GuessEnv ...`."""
