"""Running experiments on the core: content-keyed jobs and their store, a training run's set-up,
the distillation job, evaluation, the whole parameter tree with its cross-checks, and sweeps.
"""
