"""The allow lists leave out ``copy_file_range`` on the strength of a review (``syscalls.py``): each
runtime that tries it first falls back when it fails with ENOSYS. Outside the sandbox, Node's
``fs.copyFileSync`` and Go's ``io.Copy`` between files call it (checked with ``strace``); here the same
programs must still copy every byte under the allow list (the default policy)."""

from __future__ import annotations

import pytest

from execrl.sandbox import ExecutionRequest, IOTest, Limits, Sandbox, Verdict

SIZE = 100_000
COPY = {
    "javascript": (
        "const fs = require('fs');\n"
        f"fs.writeFileSync('a.txt', 'x'.repeat({SIZE}));\n"
        "fs.copyFileSync('a.txt', 'b.txt');\n"
        "console.log(fs.readFileSync('b.txt').length);\n"
    ),
    "go": (
        'package main\n\nimport (\n\t"fmt"\n\t"io"\n\t"os"\n)\n\n'
        "func main() {\n"
        f'\tos.WriteFile("a.txt", make([]byte, {SIZE}), 0o644)\n'
        '\ta, _ := os.Open("a.txt")\n\tb, _ := os.Create("b.txt")\n'
        "\tn, err := io.Copy(b, a)\n\tfmt.Println(n, err)\n}\n"
    ),
    "rust": (
        "fn main() {\n"
        f"    std::fs::write(\"a.txt\", vec![b'x'; {SIZE}]).unwrap();\n"
        '    let n = std::fs::copy("a.txt", "b.txt").unwrap();\n'
        '    println!("{} {}", n, std::fs::read("b.txt").unwrap().len());\n'
        "}\n"
    ),
}
EXPECTED = {"javascript": f"{SIZE}\n", "go": f"{SIZE} <nil>\n", "rust": f"{SIZE} {SIZE}\n"}


@pytest.mark.parametrize("language", sorted(COPY))
def test_file_copies_fall_back_when_copy_file_range_is_refused(sandbox: Sandbox, language: str) -> None:
    request = ExecutionRequest(
        language=language,
        program=COPY[language],
        tests=(IOTest("copy", "", EXPECTED[language], compare="exact"),),
        limits=Limits(timeout_s=30.0),
    )
    result = sandbox.run(request)
    assert result.verdict is Verdict.PASSED, result
