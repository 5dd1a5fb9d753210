"""execrl as a drop-in for SandboxFusion on real suites (issue 28; issue 23 item 4).

Each test guards one gap a user switching from SandboxFusion hit (HumanEval-X, MBXP, SandboxFusion's
own runner tests), named in its docstring; the ``/run_code`` ones go through the same parsing and
response code as the HTTP endpoint (``fusion.parse_run_code``, ``fusion.run_code_response``).
"""

from __future__ import annotations

import base64
import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from execrl.sandbox import CallTest, ExecutionRequest, InvalidRequestError, Sandbox, SandboxConfig
from execrl.sandbox.langs.registry import JAIL_VISIBLE
from execrl.sandbox.service.fusion import parse_run_code, run_code_response


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=2)) as sb:
        yield sb


def run_code(sandbox: Sandbox, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /run_code`` without the HTTP layer."""
    request = parse_run_code(body, default_memory_mb=1024)
    return run_code_response(sandbox.run(request), request.language)


# -- item 1: Debian's alternatives links -------------------------------------------------------------
POSIX_TOOLS = {  # command line -> expected stdout, over data.txt = "b 2\na 1\nc 3\n"
    "awk '{s+=$2} END {print s}' data.txt": "6",
    "echo 5 | nawk '{print $1*2}'": "10",
    "sed 's/l/L/g' <<< hello": "heLLo",
    "grep -c . data.txt": "3",
    "sort data.txt | head -n1": "a 1",
    "cut -d' ' -f2 data.txt | tr '\\n' ,": "2,1,3,",
    "wc -l < data.txt": "3",
    "tail -n1 data.txt": "c 3",
    "echo 1 2 3 | xargs -n1 echo | wc -l": "3",
    "find . -name 'data.*'": "./data.txt",
    "seq 3 | paste -sd+": "1+2+3",
    "expr 6 \\* 7": "42",
    "which awk": "/usr/bin/awk",
    "uniq <<< $'a\\na\\nb' | wc -l": "2",
    "echo abc | rev": "cba",
    "printf x | base64": "eA==",
    "date -u -d @0 +%Y": "1970",
}
if shutil.which("bc"):
    POSIX_TOOLS["echo '2^10' | bc"] = "1024"


def test_posix_tools_run_from_bash(sandbox: Sandbox) -> None:
    """``/usr/bin/awk`` (and ``nawk``, ``which``...) are links through ``/etc/alternatives``, which the
    jail did not bind: Bash programs got "awk: command not found"."""
    lines = ["printf 'b 2\\na 1\\nc 3\\n' > data.txt"]
    lines += [f'echo "$({command})"' for command in POSIX_TOOLS]
    result = sandbox.run(ExecutionRequest(language="bash", program="\n".join(lines) + "\n"))
    assert result.passed, result.stderr
    assert result.stdout.splitlines() == list(POSIX_TOOLS.values())


def test_alternatives_only_point_into_what_the_jail_shows() -> None:
    """Binding ``/etc/alternatives`` shows links, not files: each resolves under ``/usr`` (or the
    top-level links to it), so the bind reveals nothing of the host the jail did not already show."""
    if not os.path.isdir("/etc/alternatives"):
        pytest.skip("no /etc/alternatives on this host")
    for name in os.listdir("/etc/alternatives"):
        path = os.path.join("/etc/alternatives", name)
        if os.path.islink(path):
            assert os.path.realpath(path).startswith(JAIL_VISIBLE), path


# -- item 2: SandboxFusion's test-runner modes -------------------------------------------------------
PYTEST_CODE = """
def word_count(text):
    return len(text.split())


class TestWordCount:
    def test_file(self, tmp_path, capfd):
        path = tmp_path / "words.txt"
        path.write_text("a b  c")
        print(word_count(path.read_text()))
        assert capfd.readouterr().out == "{expected}\\n"
"""


def _needs_python_data() -> None:
    from execrl.sandbox.langs.runtimes import get_runtime

    problem = get_runtime("python-data").problem()
    if problem is not None:
        pytest.skip(problem)


def test_pytest_mode_runs_pytest_on_the_program(sandbox: Sandbox) -> None:
    """``language: pytest`` answered SandboxError; SandboxFusion runs ``pytest FILE`` (its own runner test
    uses the ``tmp_path`` and ``capfd`` fixtures): Success when every test passes, Failed otherwise."""
    _needs_python_data()
    good = run_code(sandbox, {"code": PYTEST_CODE.format(expected=3), "language": "pytest"})
    assert good["status"] == "Success", good
    assert "1 passed" in good["run_result"]["stdout"]
    bad = run_code(sandbox, {"code": PYTEST_CODE.format(expected=4), "language": "pytest"})
    assert bad["status"] == "Failed" and bad["run_result"]["return_code"] == 1
    assert "1 failed" in bad["run_result"]["stdout"]
    empty = run_code(sandbox, {"code": "def helper():\n    return 1\n", "language": "pytest"})
    assert empty["status"] == "Failed" and empty["run_result"]["return_code"] == 5  # no tests collected


GO_TEST = """package main

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func HasCloseElements(numbers []float64, threshold float64) bool {
	for i := 0; i < len(numbers); i++ {
		for j := i + 1; j < len(numbers); j++ {
			if math.Abs(numbers[i]-numbers[j]) < threshold {
				return %s
			}
		}
	}
	return %s
}

func TestHasCloseElements(t *testing.T) {
	assert := assert.New(t)
	assert.Equal(false, HasCloseElements([]float64{1.0, 2.0, 3.0}, 0.5))
	assert.Equal(true, HasCloseElements([]float64{1.0, 2.8, 3.0, 4.0, 5.0, 2.0}, 0.3))
}
"""


def test_go_test_mode_runs_humaneval_x_tests_with_testify(sandbox: Sandbox) -> None:
    """HumanEval-X's Go harness is ``go test`` with testify (``go_test`` answered SandboxError); the
    verdict is ``go test``'s exit status and its output is SandboxFusion's ("ok", "Not equal")."""
    from execrl.sandbox.langs import gocache

    if not os.path.isdir(gocache.TESTIFY):
        pytest.skip("golang-github-stretchr-testify-dev is not installed (scripts/setup.sh --system)")
    body = {"language": "go_test", "run_timeout": 60}
    good = run_code(sandbox, {**body, "code": GO_TEST % ("true", "false")})
    assert good["status"] == "Success", good
    assert good["run_result"]["stdout"].startswith("ok")
    bad = run_code(sandbox, {**body, "code": GO_TEST % ("false", "true")})
    assert bad["status"] == "Failed" and "Not equal" in bad["run_result"]["stdout"]


def test_go_builds_against_the_warm_read_only_cache(sandbox: Sandbox) -> None:
    """Each Go execution had an empty GOCACHE, so ``net/http`` (``CGO_ENABLED=0``) was recompiled every
    time (14-18 s); now GOCACHE is the prebuilt standard library, read-only in the jail."""
    from execrl.sandbox.langs import gocache

    warm = gocache.cache_dir()
    if warm is None or not gocache.bind_dirs():
        pytest.skip("no Go toolchain or no writable runtimes directory for the warm cache")
    program = (
        'package main\n\nimport (\n\t"fmt"\n\t"net/http"\n\t"os"\n)\n\nfunc main() {\n'
        '\tfmt.Println(http.StatusOK, os.Getenv("GOCACHE"))\n'
        '\t_, err := os.Create(os.Getenv("GOCACHE") + "/x")\n\tfmt.Println(err != nil)\n}\n'
    )
    result = sandbox.run(ExecutionRequest(language="go", program=program))
    assert result.passed, result.compile_output
    assert result.stdout == f"200 {warm}\ntrue\n"  # the warm cache, and nothing can write into it
    assert gocache.is_built(warm)


JUNIT_CODE = """import org.junit.jupiter.api.Test;
import static org.junit.jupiter.api.Assertions.assertEquals;

public class AdderTest {
    static int add(int a, int b) { return a + b; }

    @Test
    void adds() { assertEquals(%d, add(1, 2)); }
}
"""


def test_junit_mode_runs_the_console_launcher(sandbox: Sandbox) -> None:
    """``language: junit`` answered SandboxError; the program is written as ``<public class>.java``."""
    from execrl.sandbox.langs.jvm import JUNIT_JAR

    if not os.path.isfile(JUNIT_JAR):
        pytest.skip("junit5 is not installed (scripts/setup.sh --system)")
    good = run_code(sandbox, {"code": JUNIT_CODE % 3, "language": "junit", "run_timeout": 30})
    assert good["status"] == "Success", good
    assert "1 tests successful" in good["run_result"]["stdout"]
    bad = run_code(sandbox, {"code": JUNIT_CODE % 4, "language": "junit", "run_timeout": 30})
    assert bad["status"] == "Failed" and "1 tests failed" in bad["run_result"]["stdout"]


def test_jest_is_a_clear_refusal() -> None:
    """``jest`` stays a SandboxError naming what runs (``/run_jupyter`` runs on sandbox sessions:
    ``tests/integration/test_session_service.py``)."""
    from service_server import post, running_server

    with running_server() as url:
        _, jest = post(f"{url}/run_code", {"code": "test('x', () => {})", "language": "jest"})
        assert jest["status"] == "SandboxError" and "'jest' is not supported" in jest["message"]


# -- item 3: /run_code's default Python --------------------------------------------------------------
def test_run_code_python_has_numpy_or_says_it_does_not(sandbox: Sandbox) -> None:
    """HumanEval-X's Python harness imports numpy: on a default server every program was a silent
    Failed. Now the default runtime is python-data when installed; on a server without it the Failed
    says which package is missing and how to get it (not SandboxError: the program could choose that by
    importing one); a module SandboxFusion lacks too stays a plain Failed."""
    body = {"code": "import numpy as np\nprint(np.arange(4).sum())\n", "language": "python"}
    request = parse_run_code(body, default_memory_mb=1024, python_runtime=None)
    stdlib = run_code_response(sandbox.run(request), "python", runtime=None)
    assert stdlib["status"] == "Failed" and "'numpy' is not installed" in stdlib["message"]
    assert "--run-code-python-runtime python-data" in stdlib["message"]
    made_up = {"code": "import surely_not_a_package_xyz\n", "language": "python"}
    request = parse_run_code(made_up, default_memory_mb=1024, python_runtime=None)
    plain = run_code_response(sandbox.run(request), "python")
    assert plain["status"] == "Failed" and plain["message"] == ""
    _needs_python_data()
    default = run_code(sandbox, body)
    assert default["status"] == "Success" and default["run_result"]["stdout"] == "6\n"


# -- item 4: C++ link flags --------------------------------------------------------------------------
def test_cpp_links_openssl_like_sandbox_fusion(sandbox: Sandbox) -> None:
    """HumanEval-X's CPP/162 (MD5 of a string) failed to link: SandboxFusion adds -lcrypto -lssl
    -lpthread when they link."""
    if not os.path.isfile("/usr/include/openssl/md5.h"):
        pytest.skip("libssl-dev is not installed (scripts/setup.sh --system)")
    code = (
        "#include <openssl/md5.h>\n#include <cstdio>\n#include <thread>\n"
        "int main() {\n  unsigned char d[MD5_DIGEST_LENGTH];\n"
        '  MD5((const unsigned char*)"Hello world", 11, d);\n'
        "  std::thread t([] {});\n  t.join();\n"
        '  for (unsigned char c : d) printf("%02x", c);\n  printf("\\n");\n}\n'
    )
    response = run_code(sandbox, {"code": code, "language": "cpp"})
    assert response["status"] == "Success", response
    assert response["run_result"]["stdout"] == "3e25960a79dbc69b674cd4ec67a72c62\n"


# -- items 5 and 9: TypeScript -----------------------------------------------------------------------
TS_NODE = """import fs from "fs";
import * as path from "path";
import crypto from "crypto";
import { promisify } from "util";

const wait = promisify(setTimeout);
process.stdin.on("data", (input: Buffer) => {
  const num: number = parseInt(input.toString());
  const digest: string = crypto.createHash("md5").update(String(num)).digest("hex");
  console.log(num, digest.slice(0, 6), path.basename("/a/b.txt"), typeof fs.readFileSync);
  wait(1).then(() => process.exit());
});
"""


@pytest.mark.parametrize("language", ["typescript", "typescript-transpile"])
def test_typescript_default_imports_node_modules_and_buffer_type(sandbox: Sandbox, language: str) -> None:
    """SandboxFusion's own TypeScript tests: default imports failed at run time (no esModuleInterop),
    ``crypto`` was refused at type-check and ``Buffer`` could not be a type."""
    result = sandbox.run(ExecutionRequest(language=language, program=TS_NODE, stdin="65535"))
    assert result.passed, (result.compile_output, result.stderr)
    assert result.stdout == "65535 3c9b5f b.txt function\n"  # md5("65535")


MBXP_TS = """function findMinSum(num) {
  let sum = 0, i = 2;
  while (i * i <= num) { while (num % i === 0) { sum += i; num /= i; } i += 1; }
  return sum + num;
}


const _ = require("lodash")

function compare(object1, object2){
    return _.isEqual(object1, object2)
}

var arg00 = 12;
var x0 = findMinSum(arg00);
var v0 = 7;
if(!compare(x0, v0)){
    throw 'Error at 1th assert statement. Value = ' + JSON.stringify(x)
}
"""


def test_mbxp_typescript_template_runs_transpiled(sandbox: Sandbox) -> None:
    """MBXP's TypeScript test template references an undefined ``x`` (only evaluated on failure) and
    ``require``s lodash: SandboxFusion transpiles only, so a correct sample passes there; a type-checking
    compile failed it. ``/run_code``'s ``typescript`` now transpiles only (``--run-code-typescript check``
    restores the type check)."""
    if not os.path.isdir("/usr/share/nodejs/lodash"):
        pytest.skip("node-lodash is not installed (scripts/setup.sh --system)")
    body = {"code": MBXP_TS, "language": "typescript"}
    assert run_code(sandbox, body)["status"] == "Success"
    checked = parse_run_code(body, default_memory_mb=1024, typescript="check")
    response = run_code_response(sandbox.run(checked), checked.language)
    assert response["status"] == "Failed" and "Cannot find name 'x'" in response["compile_result"]["stderr"]


# -- item 6: execution_time ---------------------------------------------------------------------------
def test_execution_time_is_the_run_alone(sandbox: Sandbox) -> None:
    """``run_result.execution_time`` included the compile; SandboxFusion reports the run's own time."""
    code = "#include <unistd.h>\nint main() { usleep(300000); return 0; }\n"
    response = run_code(sandbox, {"code": code, "language": "cpp"})
    compiled, run = response["compile_result"]["execution_time"], response["run_result"]["execution_time"]
    assert compiled > 0.02
    assert 0.3 <= run < 0.3 + compiled / 2, (compiled, run)


# -- item 7: console.assert --------------------------------------------------------------------------
@pytest.mark.parametrize("language", ["javascript", "typescript"])
def test_console_assert_logs_by_default_and_fails_on_request(sandbox: Sandbox, language: str) -> None:
    """HumanEval-X's JavaScript tests use ``console.assert``, which only prints: Success for a wrong
    program (SandboxFusion too: its own test expects it). ``console_assert="fail"`` (server option
    ``--run-code-console-assert fail``) makes it exit 1, even through ``process.exit(0)``."""
    body = {
        "code": "console.assert(1 === 2);\nconsole.log('after');\nprocess.exit(0);\n",
        "language": language,
    }
    logged = run_code(sandbox, body)
    assert logged["status"] == "Success" and "Assertion failed" in logged["run_result"]["stderr"]
    request = parse_run_code(body, default_memory_mb=1024, console_assert="fail")
    failed = run_code_response(sandbox.run(request), request.language)
    assert failed["status"] == "Failed" and failed["run_result"]["return_code"] == 1
    assert failed["run_result"]["stdout"] == "after\n"
    ok = parse_run_code(
        {**body, "code": "console.assert(1 === 1);\n"}, default_memory_mb=1024, console_assert="fail"
    )
    assert run_code_response(sandbox.run(ok), ok.language)["status"] == "Success"


# -- item 8: plain sides of benchmarks in their own session -------------------------------------------
def test_bench_plain_sides_run_in_their_own_session() -> None:
    """Every sandboxed run is a new session (``sched_autogroup`` schedules each session as a group), so a
    plain side in the bench's own session was measured at a disadvantage (2.17x vs 1.08x)."""
    from execrl.bench._contenders import in_own_session
    from execrl.bench._languages import plain_run

    mine = os.getsid(0)
    assert in_own_session(os.getsid, 0) not in (mine, None)
    printed = plain_run([sys.executable, "-c", "import os; print(os.getsid(0))"], "/", dict(os.environ))
    assert int(printed) != mine


# -- item 9: empty code ------------------------------------------------------------------------------
def test_empty_code_runs_as_sandbox_fusion_runs_it(sandbox: Sandbox) -> None:
    """An empty ``code`` was a 422 (and SandboxFusion's ``/submit`` then answered 500 against execrl):
    SandboxFusion runs it, so Python and Bash succeed and C++ fails to link."""
    assert run_code(sandbox, {"code": "", "language": "python"})["status"] == "Success"
    assert run_code(sandbox, {"code": "", "language": "bash"})["status"] == "Success"
    cpp = run_code(sandbox, {"code": "", "language": "cpp"})
    assert cpp["status"] == "Failed" and "undefined reference to `main'" in cpp["compile_result"]["stderr"]


# -- issue 23 item 4: the program's files and the toolchain's names -----------------------------------
def test_files_named_like_build_outputs_do_not_break_the_build(sandbox: Sandbox) -> None:
    """A ``files`` entry named ``.cache`` (Go's cache was there) or ``main`` (the compiler's output) made a
    correct program fail to compile: build outputs and caches now live in ``.execrl/``."""
    files = {name: base64.b64encode(b"data").decode() for name in (".cache", "main")}
    go = run_code(
        sandbox, {"code": "package main\nfunc main() { println(1) }\n", "language": "go", "files": files}
    )
    assert go["status"] == "Success", go
    cpp = {"code": "int main() { return 0; }\n", "language": "cpp", "files": {"main/x": files["main"]}}
    assert run_code(sandbox, cpp)["status"] == "Success"


BUILD_DIR_WHY = ".execrl/ holds the sandbox's build outputs, caches and support files"


@pytest.mark.parametrize(
    ("language", "name", "why"),
    [
        ("cpp", ".execrl/out", BUILD_DIR_WHY),
        ("python", ".execrl", BUILD_DIR_WHY),
        ("javascript", "__execrl_call.js", "the javascript harness writes it"),
        ("typescript", "main.js", "the typescript build writes it from 'main.ts'"),
        ("typescript", "lib/util.js", "the typescript build writes it from 'lib/util.ts'"),
    ],
)
def test_names_that_stay_reserved_are_refused_with_one_message(
    sandbox: Sandbox, language: str, name: str, why: str
) -> None:
    """One rule for every name the toolchain writes: refused up front, saying what uses it."""
    files = {name: "x", **({"lib/util.ts": "export const u = 1;\n"} if name == "lib/util.js" else {})}
    tests = (CallTest("c", "f", (1,), expected=1),) if name == "__execrl_call.js" else ()
    with pytest.raises(InvalidRequestError) as info:
        sandbox.run(ExecutionRequest(language=language, program="x", files=files, tests=tests))
    assert str(info.value) == f"files: {name!r} is reserved ({why}); rename it"
