"""Derive the system calls each sandboxed language needs, by tracing real runs with ``strace``.

Usage (root, ``strace`` installed, from the repository root)::

    PYTHONPATH=src python scripts/trace_syscalls.py --json traced.json -- \
        python -m pytest -q -p no:cacheprovider tests/security tests/unit/sandbox
    PYTHONPATH=src python scripts/trace_syscalls.py -- python -m execrl.cli tasks check stdio

The command runs under ``strace -f``. A language without a set in ``syscalls.LANGUAGE_SYSCALLS`` runs
under the deny list alone, so its trace is complete; for one with a set, a call the allow list refuses
still shows in the trace (``strace`` sees the attempt before seccomp answers it), only what the program
would have done after that call succeeded is missed. From the trace the script keeps only what runs inside a sandbox once its job has arrived (that is where the allow list
applies, ``harness.main``): a worker is a process cloned with ``CLONE_NEWPID``; its language is the
``"name"`` in the job it reads (``runner.build_job`` puts ``"language"`` first); every process it starts
inherits that language. It prints, per language, the syscalls seen and how they compare with
``execrl.sandbox.zygote.syscalls``: ``missing`` (traced, not allowed: add them after review) and ``unused``
(allowed, never traced: fine when the comment there says why).

A new language: register it, run its test programs under this script, review the ``missing`` list by
hand (what is each call for? is it on the deny list?) and add the set to ``syscalls.LANGUAGE_SYSCALLS``.
Traces cover only what the programs did: a runtime's rarely taken paths (threads, timers, polling) are
added by hand from the runtime's documentation, with a comment.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

from execrl.sandbox.zygote import syscalls

_LINE = re.compile(r"^(\d+) +(?:<\.\.\. (\w+) resumed>|(\w+)\()")
_RETURN = re.compile(r"= (\d+)(?: /\* (\d+) in strace's PID NS \*/)?\s*$")
_JOB_LANGUAGE = re.compile(r'\{\\"language\\": \{\\"name\\": \\"([A-Za-z0-9_.+-]+)\\"')
_ENDED = re.compile(r"^(\d+) +\+\+\+ (?:exited|killed)")
_FORKS = ("clone", "clone3", "fork", "vfork")


@dataclass
class TraceState:
    """What the parser knows about each traced process (host pids).

    A child's first calls can come before its parent's ``clone`` returns (``vfork`` even waits for the
    child's ``execve``), so calls of a process not yet placed are kept (``early``) and counted once its
    parent's ``clone`` returns it into a sandbox."""

    workers: set[int] = field(default_factory=set)  # pid 1 of a sandbox, before its job arrived
    language: dict[int, str] = field(default_factory=dict)  # pid -> language of the sandbox it is in
    seen: dict[str, set[str]] = field(default_factory=dict)  # language -> syscall names
    cloning_sandbox: set[int] = field(default_factory=set)  # pids inside a clone(CLONE_NEWPID)
    early: dict[int, set[str]] = field(default_factory=dict)  # calls of processes not placed yet
    children: dict[int, list[int]] = field(default_factory=dict)

    def feed(self, line: str) -> None:
        match = _LINE.match(line)
        if match is None:  # signals, exits ("+++ exited with 0 +++": the pid may be reused)
            ended = _ENDED.match(line)
            if ended is not None:  # pids wrap: a later process with this pid starts unplaced
                self._forget(int(ended.group(1)))
            return
        pid = int(match.group(1))
        resumed, name = match.group(2), match.group(3)
        if pid in self.workers and pid not in self.language:
            found = _JOB_LANGUAGE.search(line)
            if found is not None:
                self.early.pop(pid, None)  # pid 1's own calls before the job are not under the list
                self._place(pid, found.group(1))
        language = self.language.get(pid)
        if name is not None and language is not None:
            self.seen.setdefault(language, set()).add(name)
        elif name is not None:
            self.early.setdefault(pid, set()).add(name)
        if name == "clone" and "CLONE_NEWPID" in line:
            self.cloning_sandbox.add(pid)
        if (resumed or name) in _FORKS:
            self._child(pid, line, language)

    def _forget(self, pid: int) -> None:
        self.early.pop(pid, None)
        self.language.pop(pid, None)
        self.workers.discard(pid)
        self.cloning_sandbox.discard(pid)

    def _place(self, pid: int, language: str) -> None:
        self.language[pid] = language
        self.seen.setdefault(language, set()).update(self.early.pop(pid, set()))
        for child in self.children.pop(pid, []):
            self._place(child, language)

    def _child(self, pid: int, line: str, language: str | None) -> None:
        returned = _RETURN.search(line)
        if returned is None:  # unfinished: the return comes with the resumed line
            return
        child = int(returned.group(2) or returned.group(1))
        if language is not None:
            self._place(child, language)
        elif pid in self.cloning_sandbox:
            self.workers.add(child)
            self.early.pop(child, None)
        else:
            self.children.setdefault(pid, []).append(child)
        self.cloning_sandbox.discard(pid)


def parse(lines: list[str]) -> dict[str, set[str]]:
    """Per language, the syscall names its sandboxes made after their job arrived."""
    state = TraceState()
    for line in lines:
        state.feed(line)
    return state.seen


def run_traced(command: list[str], keep: str | None) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="execrl-trace-") as tmp:
        out = keep or os.path.join(tmp, "trace")
        strace = ["strace", "-f", "-qq", "--decode-pids=pidns", "-s", "64", "-o", out]
        completed = subprocess.run([*strace, *command], check=False)
        if completed.returncode != 0:
            print(f"note: the traced command exited with {completed.returncode}", file=sys.stderr)
        with open(out, encoding="utf-8", errors="replace") as fh:
            return fh.read().splitlines()


def report(seen: dict[str, set[str]]) -> dict[str, dict[str, list[str]]]:
    out = {}
    for language, names in sorted(seen.items()):
        allowed = syscalls.LANGUAGE_SYSCALLS.get(language, frozenset())
        out[language] = {
            "traced": sorted(names),
            "missing": sorted(names - allowed),
            "unused": sorted(allowed - names),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", help="also write the per-language report here")
    parser.add_argument("--keep-trace", metavar="PATH", help="keep strace's raw output here")
    parser.add_argument("--from-trace", metavar="PATH", help="parse this raw output instead of running")
    parser.add_argument("command", nargs="*", help="the command to trace, after --")
    args = parser.parse_args()
    if args.from_trace:
        with open(args.from_trace, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    elif args.command:
        lines = run_traced(args.command, args.keep_trace)
    else:
        parser.error("give a command to trace (after --) or --from-trace PATH")
    result = report(parse(lines))
    for language, entry in result.items():
        print(f"{language}: {len(entry['traced'])} traced")
        print(f"  missing from the allow list: {' '.join(entry['missing']) or '-'}")
        print(f"  allowed, not traced: {' '.join(entry['unused']) or '-'}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
