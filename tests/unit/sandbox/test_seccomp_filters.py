"""The seccomp programs, run by a small classic-BPF interpreter (no kernel needed): the allow list's
binary search gives each syscall number the action its table says, and the deny list keeps its rules."""

from __future__ import annotations

import errno
import struct

import pytest

from execrl.sandbox import SandboxConfig, api
from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.langs.registry import list_languages
from execrl.sandbox.zygote import seccomp, syscalls

ALLOW = seccomp.SECCOMP_RET_ALLOW
EPERM = seccomp.SECCOMP_RET_ERRNO | errno.EPERM
ENOSYS = seccomp.SECCOMP_RET_ERRNO | errno.ENOSYS
KILL = seccomp.SECCOMP_RET_KILL_PROCESS


def run_bpf(
    program: bytes, nr: int, args: tuple[int, ...] = (), arch: int = seccomp.AUDIT_ARCH_X86_64
) -> int:
    """Evaluate a seccomp cBPF program on ``struct seccomp_data`` {nr, arch, ip, args[6]}."""
    return trace_bpf(program, nr, args, arch)[0]


def trace_bpf(
    program: bytes, nr: int, args: tuple[int, ...] = (), arch: int = seccomp.AUDIT_ARCH_X86_64
) -> tuple[int, int]:
    """(action, instructions executed)."""
    padded = (*args, *(0,) * (6 - len(args)))
    data = struct.pack("<iIQ6Q", nr, arch, 0, *padded)
    insns = [struct.unpack("HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    acc, pc, steps = 0, 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        steps += 1
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x06:  # ret k
            return k, steps
        elif code == 0x05:  # ja k
            pc += k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if taken else jf


def test_allow_filter_gives_every_number_its_table_action() -> None:
    """Reference (a set look-up) against the binary search, for every number up to past the table."""
    allowed = {0, 1, 2, 3, 9, 10, 11, 60, 231, 299, 301, 402}
    program = seccomp.build_allow_filter(allowed)
    denied = set(seccomp.DENIED_SYSCALLS.values())
    for nr in range(600):
        expected = ALLOW if nr in allowed else EPERM if nr in denied else ENOSYS
        assert run_bpf(program, nr) == expected, nr
    assert run_bpf(program, 0x40000000) == ENOSYS


def test_allow_filter_search_is_logarithmic() -> None:
    """A syscall costs about log2(runs) compares, not one per allowed number (the cost stays flat)."""
    allowed = set(range(0, 400, 2)) - set(seccomp.DENIED_SYSCALLS.values())  # ~400 alternating runs
    program = seccomp.build_allow_filter(allowed)
    runs = len(seccomp.allow_list_actions(allowed))
    assert runs > 300
    denied = set(seccomp.DENIED_SYSCALLS.values())
    deepest = 0
    for nr in range(600):
        action, steps = trace_bpf(program, nr)
        assert action == (ALLOW if nr in allowed else EPERM if nr in denied else ENOSYS), nr
        deepest = max(deepest, steps)
    # 4 for the arch check and the number's load, 1 return, then one compare per level (9 for ~400
    # runs) plus at most one long jump per level where a subtree is over 255 instructions.
    assert deepest <= 4 + 1 + 2 * 9


def test_allow_filter_kills_another_architecture() -> None:
    program = seccomp.build_allow_filter({0, 1})
    assert run_bpf(program, 0, arch=0x40000003) == KILL  # AUDIT_ARCH_I386


def test_allow_list_refuses_a_denied_syscall() -> None:
    with pytest.raises(ValueError, match="ptrace"):
        seccomp.build_allow_filter({0, seccomp.DENIED_SYSCALLS["ptrace"]})


def test_deny_filter_keeps_its_argument_rules() -> None:
    program = seccomp.build_filter()
    assert run_bpf(program, seccomp.SYS_SOCKET, (seccomp.AF_UNIX,)) == ALLOW
    assert run_bpf(program, seccomp.SYS_SOCKET, (2,)) == EPERM  # AF_INET
    assert run_bpf(program, seccomp.SYS_CLONE, (0x10000000,)) == EPERM  # CLONE_NEWUSER
    assert run_bpf(program, seccomp.SYS_CLONE, (0x11,)) == ALLOW  # SIGCHLD
    assert run_bpf(program, seccomp.DENIED_SYSCALLS["bpf"]) == EPERM
    assert run_bpf(program, 0x40000000) == KILL


@pytest.mark.parametrize("language", sorted(syscalls.LANGUAGE_SYSCALLS))
def test_language_sets_build_and_avoid_the_deny_list(language: str) -> None:
    names = syscalls.LANGUAGE_SYSCALLS[language]
    assert not names & set(seccomp.DENIED_SYSCALLS), "a denied syscall in an allow list"
    program = seccomp.build_allow_filter(syscalls.numbers(names))
    assert run_bpf(program, syscalls.NUMBERS["read"]) == ALLOW
    assert run_bpf(program, syscalls.NUMBERS["exit_group"]) == ALLOW
    assert run_bpf(program, seccomp.DENIED_SYSCALLS["ptrace"]) == EPERM


def test_unknown_syscall_name_is_an_error() -> None:
    with pytest.raises(KeyError, match="no_such_call"):
        syscalls.numbers(frozenset({"read", "no_such_call"}))


def test_seccomp_policy_is_validated() -> None:
    assert SandboxConfig().seccomp_policy == "allow"
    with pytest.raises(InvalidRequestError, match=r"seccomp_policy='none'.*'allow', 'deny'"):
        SandboxConfig(seccomp_policy="none")


def test_languages_without_an_allow_list_are_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A language registered without a traced set runs under the deny list alone: never silently."""
    monkeypatch.setattr(syscalls, "LANGUAGE_SYSCALLS", {"python": syscalls.LANGUAGE_SYSCALLS["python"]})
    with caplog.at_level("WARNING", logger="execrl.sandbox.api"):
        api._log_deny_only_languages()
    listed = caplog.text.split("no allow list for ", 1)[1].split(" (deny list only)", 1)[0].split(", ")
    assert "cpp" in listed and "python" not in listed


def test_every_built_in_language_has_an_allow_list(caplog: pytest.LogCaptureFixture) -> None:
    """Guards against a language registered without its traced list: it would run under the deny list
    alone by default, with only a warning to say so."""
    with caplog.at_level("WARNING", logger="execrl.sandbox.api"):
        api._log_deny_only_languages()
    assert "no allow list" not in caplog.text
    assert set(list_languages()) <= set(syscalls.LANGUAGE_SYSCALLS) == set(syscalls.TRACED)


@pytest.mark.parametrize("language", sorted(syscalls.TRACED))
def test_every_traced_call_is_allowed_or_on_the_deny_list(language: str) -> None:
    """Guards the lists against an edit that drops a call the traced programs make (they would then get
    ENOSYS); denied calls in the traces are the hostile programs' attempts."""
    traced = syscalls.TRACED[language]
    allowed = syscalls.LANGUAGE_SYSCALLS[language]
    assert traced - allowed <= set(seccomp.DENIED_SYSCALLS) | syscalls.REFUSED_ON_PURPOSE
    assert not allowed & syscalls.REFUSED_ON_PURPOSE


def test_template_filter_allows_the_fork_path_and_nothing_more() -> None:
    """A session template's variant (``sessions/userns.py``): ``mount`` with a fork's ``/proc`` or work
    directory flags only (not a remount, bind, move, a flag in the high word or no flags), ``umount2``
    detaching, ``unshare`` of a cgroup namespace alone, ``clone`` with a fork's namespaces but never a
    user or cgroup namespace; the plain deny list refuses all of them, and the template's keeps the rest
    of the deny list (``setns``, ``ptrace``, ``chroot``, socket families)."""
    template, plain = seccomp.build_filter(template=True), seccomp.build_filter()
    mount, umount2, unshare, clone = 165, 166, 272, 56
    nosuid_nodev, with_noexec = 0x6, 0xE
    allowed = [
        (mount, (0, 0, 0, nosuid_nodev)),
        (mount, (0, 0, 0, with_noexec)),
        (umount2, (0, 2)),
        (unshare, (0x02000000,)),
        (clone, (seccomp.TEMPLATE_CLONE_FLAGS,)),
        (clone, (0x01200011,)),  # glibc's fork: no namespace
    ]
    refused = [
        (mount, (0, 0, 0, 0)),
        (mount, (0, 0, 0, 0x1020)),  # MS_REMOUNT | MS_BIND
        (mount, (0, 0, 0, 0x1006)),  # a bind with the allowed flags
        (mount, (0, 0, 0, (1 << 32) | nosuid_nodev)),
        (umount2, (0, 0)),
        (unshare, (0x10000000,)),  # a user namespace
        (unshare, (0x02000000 | 0x20000,)),  # cgroup and mount
        (clone, (0x10000000 | 0x11,)),
        (clone, (0x02000000 | 0x11,)),
        (seccomp.DENIED_SYSCALLS["setns"], (0, 0)),
        (seccomp.DENIED_SYSCALLS["ptrace"], (16, 1)),
        (seccomp.DENIED_SYSCALLS["chroot"], (0,)),
        (seccomp.SYS_SOCKET, (17, 3, 0)),  # AF_PACKET
    ]
    for nr, args in allowed:
        assert run_bpf(template, nr, args) == ALLOW, (nr, args)
        assert run_bpf(plain, nr, args) == (ALLOW if nr == clone and args == (0x01200011,) else EPERM)
    for nr, args in refused:
        assert run_bpf(template, nr, args) == EPERM, (nr, args)
        assert run_bpf(plain, nr, args) == EPERM, (nr, args)
    assert run_bpf(template, 0, ()) == ALLOW and run_bpf(template, 1, (), arch=0x40000003) == KILL
