"""The programs ``execrl bench sandbox --languages`` runs per language: a hello world and a
MultiPL-E-sized problem (one small function and five checks of it in the program's own ``main``, as a
MultiPL-E test file is: the function, then its asserts; it prints ``5`` when all five hold).

Both are stdin/stdout programs, so every language runs them the same way (compile, then run once).
"""

from __future__ import annotations

HELLO: dict[str, str] = {
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

# count_vowels (the ``functions`` suite's template) and five checks; prints how many checks held.
PROBLEM: dict[str, str] = {
    "python": """def count_vowels(s):
    return sum(1 for c in s if c.lower() in "aeiou")

checks = [("", 0), ("Ape", 2), ("xyz", 0), ("AEIOU aeiou", 10), ("hello world", 3)]
print(sum(count_vowels(s) == n for s, n in checks))
""",
    "c": """#include <ctype.h>
#include <stdio.h>
#include <string.h>
static int count_vowels(const char *s) {
    int n = 0;
    for (; *s; s++) if (strchr("aeiou", tolower((unsigned char)*s))) n++;
    return n;
}
int main(void) {
    const char *in[] = {"", "Ape", "xyz", "AEIOU aeiou", "hello world"};
    int want[] = {0, 2, 0, 10, 3}, ok = 0;
    for (int i = 0; i < 5; i++) ok += count_vowels(in[i]) == want[i];
    printf("%d\\n", ok);
    return 0;
}
""",
    "cpp": """#include <bits/stdc++.h>
using namespace std;
long long count_vowels(string s) {
    long long n = 0;
    for (char c : s) if (string("aeiou").find((char)tolower((unsigned char)c)) != string::npos) n++;
    return n;
}
int main() {
    vector<pair<string, long long>> checks = {{"", 0}, {"Ape", 2}, {"xyz", 0}, {"AEIOU aeiou", 10}, {"hello world", 3}};
    int ok = 0;
    for (auto& [s, n] : checks) ok += count_vowels(s) == n;
    cout << ok << "\\n";
}
""",
    "rust": """fn count_vowels(s: &str) -> usize {
    s.chars().filter(|c| "aeiou".contains(c.to_ascii_lowercase())).count()
}
fn main() {
    let checks = [("", 0), ("Ape", 2), ("xyz", 0), ("AEIOU aeiou", 10), ("hello world", 3)];
    let ok = checks.iter().filter(|(s, n)| count_vowels(s) == *n).count();
    println!("{}", ok);
}
""",
    "go": """package main

import (
\t"fmt"
\t"strings"
)

func countVowels(s string) int {
\tn := 0
\tfor _, c := range strings.ToLower(s) {
\t\tif strings.ContainsRune("aeiou", c) {
\t\t\tn++
\t\t}
\t}
\treturn n
}

func main() {
\tins := []string{"", "Ape", "xyz", "AEIOU aeiou", "hello world"}
\twant := []int{0, 2, 0, 10, 3}
\tok := 0
\tfor i, s := range ins {
\t\tif countVowels(s) == want[i] {
\t\t\tok++
\t\t}
\t}
\tfmt.Println(ok)
}
""",
    "java": """import java.util.*;

public class Main {
    static long countVowels(String s) {
        long n = 0;
        for (char c : s.toCharArray()) if ("aeiou".indexOf(Character.toLowerCase(c)) >= 0) n++;
        return n;
    }
    public static void main(String[] args) {
        String[] in = {"", "Ape", "xyz", "AEIOU aeiou", "hello world"};
        long[] want = {0, 2, 0, 10, 3};
        int ok = 0;
        for (int i = 0; i < in.length; i++) if (countVowels(in[i]) == want[i]) ok++;
        System.out.println(ok);
    }
}
""",
    "javascript": """function count_vowels(s) {
  let n = 0;
  for (const c of s) if ("aeiou".includes(c.toLowerCase())) n++;
  return n;
}
const checks = [["", 0], ["Ape", 2], ["xyz", 0], ["AEIOU aeiou", 10], ["hello world", 3]];
console.log(checks.filter(([s, n]) => count_vowels(s) === n).length);
""",
    "typescript": """function count_vowels(s: string): number {
  let n = 0;
  for (const c of s) if ("aeiou".includes(c.toLowerCase())) n++;
  return n;
}
const checks: [string, number][] = [["", 0], ["Ape", 2], ["xyz", 0], ["AEIOU aeiou", 10], ["hello world", 3]];
console.log(checks.filter(([s, n]) => count_vowels(s) === n).length);
""",
    "bash": """count_vowels() {
  local s="${1,,}" n=0 i
  for ((i = 0; i < ${#s}; i++)); do
    case "${s:i:1}" in a|e|i|o|u) n=$((n + 1)) ;; esac
  done
  echo "$n"
}
ok=0
for pair in ":0" "Ape:2" "xyz:0" "AEIOU aeiou:10" "hello world:3"; do
  [ "$(count_vowels "${pair%%:*}")" = "${pair##*:}" ] && ok=$((ok + 1))
done
echo "$ok"
""",
}

# program name -> (source per language, expected stdout)
# ``/run_code``'s TypeScript (types ignored) runs the same programs.
HELLO["typescript-transpile"] = HELLO["typescript"]
PROBLEM["typescript-transpile"] = PROBLEM["typescript"]
PROGRAMS: dict[str, tuple[dict[str, str], str]] = {"hello": (HELLO, "hello\n"), "problem": (PROBLEM, "5\n")}

# A third Go program: importing ``net/http`` (testify's ``assert`` does) made a cold build recompile
# ``net``, ``crypto/tls`` and ``net/http`` (``CGO_ENABLED=0``), several seconds, before the warm cache
# (``sandbox/langs/gocache.py``); measured warm and with the per-execution cold cache (``--go-net-http``).
GO_NET_HTTP = (
    'package main\n\nimport (\n\t"fmt"\n\t"net/http"\n)\n\n'
    "func main() {\n\tfmt.Println(http.StatusText(http.StatusOK))\n}\n",
    "OK\n",
)
