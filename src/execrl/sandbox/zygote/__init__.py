"""The zygote runtime: everything the zygote process imports, and so everything its forks run.

The zygote (``server.py``) is a small single-threaded fork server; each fork isolates itself
(``jail.py``: namespaces, tmpfs root, seccomp from ``seccomp.py``/``syscalls.py``, rlimits) and
becomes the in-sandbox harness ``H`` (``harness.py``, ``testgroups.py``), which runs candidates
``C`` (``child.py``, ``pyexit.py``; other languages via ``spawn.py``, warm starts ``warm.py``) and
reports bounded records (``records.py``). Session kernels fork from here too (``session_*.py``).

The one rule of this package (``tests/unit/sandbox/test_zygote_contract.py``): its modules import
the standard library and each other only, and ``typing`` only under ``TYPE_CHECKING = False``.
Every module here is loaded into the zygote and copied into every fork of it, so a third-party
import costs memory and start time in every sandbox, and ``typing`` alone adds about 2 MB.
"""
