"""Programs the harness starts with ``posix_spawn`` (``sandbox/zygote/spawn.py``) get exactly what fork +
``child.exec_program`` gave them: the same descriptors (never the harness's result pipe), their own
session, default signal dispositions, an empty signal mask and the job's rlimits, soft = hard where the
prelude set them so. Also when a compile step keeps fork + exec (its CPU limit below the run's)."""

from __future__ import annotations

import pytest

from execrl.sandbox import ExecutionRequest, IOTest, Limits, Sandbox, Verdict

PROBE = r"""
ls /proc/$$/fd > fds.txt; sort -n fds.txt | tr '\n' ' '; echo
read -r stat < /proc/$$/stat; set -- ${stat##*) }; echo "session_is_self=$([ "$4" = "$$" ] && echo yes || echo no)"
grep -E '^Sig(Ign|Blk):' /proc/self/status
echo "fsize=$(ulimit -Sf)/$(ulimit -Hf) nofile=$(ulimit -Sn)/$(ulimit -Hn) nproc=$(ulimit -Su)/$(ulimit -Hu)"
echo "cpu=$(ulimit -St)/$(ulimit -Ht)"
"""

# glibc's posix_spawn leaves its two internal signals (32 SIGCANCEL, 33 SIGSETXID) ignored in the child
# (it cannot run the parent's handlers before the exec) and refuses to reset them; every glibc program
# reinstalls both at start-up. No other signal is ignored: the harness's SIGPIPE/SIGXFSZ/SIGXCPU are reset.
GLIBC_INTERNAL_IGNORED = f"{(1 << 31) | (1 << 32):016x}"

LIMITS = Limits(max_file_mb=8, max_open_files=40, max_processes=20, cpu_time_s=7.0, timeout_s=20.0)


def expected(limits: Limits) -> str:
    fsize = limits.max_file_mb * 1024  # ulimit -f counts 1024-byte blocks
    nofile, nproc = limits.max_open_files, limits.max_processes + 2
    return (
        f"0 1 2 {nofile - 1} \n"  # stdin, stdout, stderr and bash's script (the highest free), nothing else
        "session_is_self=yes\n"
        "SigBlk:\t0000000000000000\n"
        f"SigIgn:\t{GLIBC_INTERNAL_IGNORED}\n"
        f"fsize={fsize}/{fsize} nofile={nofile}/{nofile} nproc={nproc}/{nproc}\n"
    )


def test_a_spawned_program_has_the_preludes_descriptors_session_signals_and_limits(sandbox: Sandbox) -> None:
    tests = (IOTest("probe", "", "x"), IOTest("again", "", "x"))
    result = sandbox.run(ExecutionRequest(language="bash", program=PROBE, tests=tests, limits=LIMITS))
    assert len(result.tests) == len(tests), result
    for test in result.tests:
        assert test.got is not None, result
        head, cpu = test.got.rsplit("cpu=", 1)
        assert head == expected(LIMITS), (test.got, result.stderr)
        soft, hard = (int(x) for x in cpu.split("/"))
        assert soft <= 7 and hard == soft + 1, test.got  # ceil(CPU left), SIGKILL a second later


def test_stdin_reaches_a_spawned_program(sandbox: Sandbox) -> None:
    request = ExecutionRequest(
        language="bash", program="read -r a b; echo $((a + b))\n", tests=(IOTest("sum", "2 40\n", "42\n"),)
    )
    assert sandbox.run(request).passed


@pytest.mark.parametrize("compile_timeout_s", [5.0, 30.0])
def test_compiled_program_limits_with_compile_limit_below_and_above_the_runs(
    sandbox: Sandbox, compile_timeout_s: float
) -> None:
    """A compile limit below the run's cannot be set on the harness first (hard limits only go down):
    that compile forks, and the run still gets its own, higher, limit."""
    program = (
        "#include <stdio.h>\n#include <sys/resource.h>\n"
        "int main(void) { struct rlimit r; getrlimit(RLIMIT_CPU, &r);\n"
        '  printf("%ld/%ld\\n", (long)r.rlim_cur, (long)r.rlim_max); return 0; }\n'
    )
    limits = Limits(cpu_time_s=12.0, timeout_s=30.0, compile_timeout_s=compile_timeout_s)
    result = sandbox.run(
        ExecutionRequest(language="c", program=program, tests=(IOTest("cpu", "", "12/13\n"),), limits=limits)
    )
    assert result.tests[0].verdict is Verdict.PASSED, result
