"""Shared by the unit tests: this file puts ``tests/unit`` on ``sys.path`` (pytest's default import mode),
so a test in any sub-folder can import the helper module ``fakes`` (hand-made rollouts and scores)."""
