"""Per-language programs for the language tests: ``SUM`` reads two integers and prints their sum,
``BROKEN`` does not compile (or parse), ``CRASH`` fails at run time, ``SPIN`` loops forever."""

from __future__ import annotations

SUM = {
    "c": '#include <stdio.h>\nint main(void){long a,b;if(scanf("%ld %ld",&a,&b)!=2)return 1;printf("%ld\\n",a+b);return 0;}\n',
    "cpp": '#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a+b<<"\\n";}\n',
    "rust": (
        "use std::io::Read;\nfn main(){let mut s=String::new();std::io::stdin().read_to_string(&mut s).unwrap();\n"
        'let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();println!("{}",v[0]+v[1]);}\n'
    ),
    "go": 'package main\nimport "fmt"\nfunc main(){var a,b int64\nfmt.Scan(&a,&b)\nfmt.Println(a+b)}\n',
    "java": (
        "import java.util.*;\npublic class Main{public static void main(String[] x){\n"
        "Scanner s=new Scanner(System.in);System.out.println(s.nextLong()+s.nextLong());}}\n"
    ),
    "javascript": 'const d=require("fs").readFileSync(0,"utf8").trim().split(/\\s+/).map(Number);\nconsole.log(d[0]+d[1]);\n',
    "typescript": (
        'const d: number[] = require("fs").readFileSync(0, "utf8").trim().split(/\\s+/).map(Number);\n'
        "console.log(d[0] + d[1]);\n"
    ),
    "bash": "read a b\necho $((a + b))\n",
}

BROKEN = {
    "c": "int main(void) { return undefined_name; }\n",
    "cpp": "int main() { return undefined_name; }\n",
    "rust": 'fn main() { let x: i32 = "text"; }\n',
    "go": "package main\nfunc main() { undefinedName() }\n",
    "java": 'public class Main { public static void main(String[] a) { int x = "text"; } }\n',
    "typescript": 'const x: number = "text";\nconsole.log(x);\n',
}
BROKEN_MARK = {  # a piece of the compiler's message that must reach compile_output
    "c": "undefined_name",
    "cpp": "undefined_name",
    "rust": "mismatched types",
    "go": "undefinedName",
    "java": "incompatible types",
    "typescript": "TS2322",
}

CRASH = {
    "c": "#include <stdlib.h>\nint main(void){abort();}\n",
    "cpp": '#include <stdexcept>\nint main(){throw std::runtime_error("boom");}\n',
    "rust": 'fn main(){ panic!("boom"); }\n',
    "go": 'package main\nfunc main(){ panic("boom") }\n',
    "java": 'public class Main{public static void main(String[] a){throw new IllegalStateException("boom");}}\n',
    "javascript": 'throw new Error("boom");\n',
    "typescript": 'throw new Error("boom");\n',
    "bash": "echo boom >&2\nexit 3\n",
}
CRASH_MARK = {
    "rust": "boom",
    "go": "boom",
    "java": "boom",
    "javascript": "boom",
    "typescript": "boom",
    "bash": "boom",
}

SPIN = {
    "c": "int main(void){volatile unsigned long x=0;for(;;)x++;}\n",
    "cpp": "int main(){volatile unsigned long x=0;for(;;)x++;}\n",
    "rust": "fn main(){ let mut x: u64 = 0; loop { unsafe { std::ptr::write_volatile(&mut x, x + 1); } } }\n",
    "go": "package main\nvar x uint64\nfunc main(){ for { x++ } }\n",
    "java": "public class Main{static volatile long x;public static void main(String[] a){for(;;)x++;}}\n",
    "javascript": "let x = 0;\nfor (;;) { x++; }\n",
    "typescript": "let x: number = 0;\nfor (;;) { x++; }\n",
    "bash": "while :; do :; done\n",
}

LANGUAGES = sorted(SUM)
COMPILED = sorted(BROKEN)
