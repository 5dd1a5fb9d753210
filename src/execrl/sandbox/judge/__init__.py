"""Judging in the parent, which alone holds the expected values: the harness's records plus the
kernel's view become verdicts (``verdicts.py``); values and outputs are compared (``compare.py``);
assert-style tests are rewritten into probes whose expected values never enter the sandbox
(``asserts.py``, ``literals.py``).
"""
