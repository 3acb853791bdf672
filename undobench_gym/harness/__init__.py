"""The harness: the CLI, sweeps and the runner, the executors (local workers, Ray) and the
training integrations (TRL, OpenEnv). The top layer: it may import every other."""
