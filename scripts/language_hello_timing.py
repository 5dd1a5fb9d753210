"""Quick timing: a hello world per sandbox language, isolated vs a plain ``subprocess`` (same argv, same
environment, a fresh temporary directory, compile included), medians over ``--rounds``.

A stop-gap measurement for issue 13's language work; ``execrl bench sandbox --languages`` is the
benchmark proper. Run as root from the repository:

    PYTHONPATH=src python scripts/language_hello_timing.py --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

from execrl.sandbox import ExecutionRequest, IOTest, Sandbox, SandboxConfig
from execrl.sandbox.jail import ENV
from execrl.sandbox.languages import available_languages, get_language
from execrl.sandbox.types import Limits

HELLO = {
    "python": 'print("hello")\n',
    "c": '#include <stdio.h>\nint main(void){puts("hello");return 0;}\n',
    "cpp": '#include <iostream>\nint main(){std::cout<<"hello\\n";}\n',
    "rust": 'fn main(){println!("hello");}\n',
    "go": 'package main\nimport "fmt"\nfunc main(){fmt.Println("hello")}\n',
    "java": 'public class Main{public static void main(String[] a){System.out.println("hello");}}\n',
    "javascript": 'console.log("hello");\n',
    "typescript": 'const greeting: string = "hello";\nconsole.log(greeting);\n',
    "bash": "echo hello\n",
}


def plain_once(name: str) -> float:
    """Compile and run like the sandbox does, without any isolation."""
    language = get_language(name)
    with tempfile.TemporaryDirectory() as work:
        spec = language.job_spec(language.default_path, Limits())
        files = {language.default_path: HELLO[name], **language.support_files(False)}
        for path, text in files.items():
            with open(os.path.join(work, path), "w", encoding="utf-8") as handle:
                handle.write(text)
        env = {**ENV, "HOME": work, "TMPDIR": work}
        env.update({k: work + v[1:] if v.startswith("./") else v for k, v in spec["env"].items()})
        start = time.perf_counter()
        if spec["compile"]:
            subprocess.run(spec["compile"], cwd=work, env=env, check=True, capture_output=True)
        argv = spec["run"] or ["/usr/bin/python3", language.default_path]
        out = subprocess.run(argv, cwd=work, env=env, check=True, capture_output=True).stdout
        assert out == b"hello\n", out
        return time.perf_counter() - start


def sandbox_once(sandbox: Sandbox, name: str) -> float:
    request = ExecutionRequest(language=name, program=HELLO[name], tests=(IOTest("t", "", "hello\n"),))
    start = time.perf_counter()
    result = sandbox.run(request)
    elapsed = time.perf_counter() - start
    assert result.passed, result
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    report = {}
    with Sandbox(SandboxConfig(workers=2)) as sandbox:
        for name in available_languages():
            isolated, plain = [], []
            for _ in range(args.rounds):  # interleaved, so load changes hit both alike
                isolated.append(sandbox_once(sandbox, name))
                plain.append(plain_once(name))
            iso, raw = statistics.median(isolated), statistics.median(plain)
            report[name] = {"sandbox_p50_ms": round(iso * 1e3, 1), "plain_p50_ms": round(raw * 1e3, 1),
                            "ratio": round(iso / raw, 2)}  # fmt: skip
            print(name, report[name], flush=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
