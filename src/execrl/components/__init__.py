"""execrl.components: what the recipes and the executors' workers both build, below both of them.

A Ray worker (``execrl.distributed``) builds its policy replica, sandbox and reward settings from the run's
``TrainConfig`` exactly as the recipe does, and samples through the same group sampler; so those pieces
live here, and ``execrl.recipes`` only composes them (the layering is checked by import-linter, see
``pyproject.toml``).

* ``setup.py``: from a ``TrainConfig`` to the run's parts: run directory, seeding, model path and
  loading, task suites, sandbox, reward and trainer configs, user verifiers.
* ``sampling.py``: one step's groups: generate ``samples_per_prompt`` completions per task, score them in
  the sandbox, and (DAPO) refill zero-variance groups; the streamed variant scores each group while the
  next one generates.
"""
