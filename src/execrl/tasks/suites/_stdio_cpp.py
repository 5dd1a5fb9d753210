"""C++17 reference and buggy programs for a dozen stdio problems, to exercise the sandbox's C++ path.

Each variant reuses the inputs and expected outputs of one Python problem instance, so the C++ reference
must print the same tokens as the Python reference (floats with ``%.6f``, compared with tolerance).
"""

from __future__ import annotations

from execrl.tasks.suites._stdio_core import CppVariant as C

# Explicit headers rather than <bits/stdc++.h>: compiling the whole library costs seconds per program.
HEAD = (
    "#include <algorithm>\n#include <cstdio>\n#include <iostream>\n#include <string>\n#include <vector>\n"
    "using namespace std;\n"
)

CPP_VARIANTS: tuple[C, ...] = (
    C("aggregate", 0,
      HEAD + "int main() {\n    int n; cin >> n;\n    long long s = 0;\n    for (int i = 0; i < n; i++) { long long x; cin >> x; s += x; }\n"
      "    cout << s << endl;\n}\n",
      HEAD + "int main() {\n    int n; cin >> n;\n    long long s = 0;\n    for (int i = 0; i < n - 1; i++) { long long x; cin >> x; s += x; }\n"
      "    cout << s << endl;\n}\n"),
    C("count_compared", 1,
      HEAD + "int main() {\n    int n, k; cin >> n >> k;\n    int c = 0;\n    for (int i = 0; i < n; i++) { int x; cin >> x; if (x > k) c++; }\n"
      "    cout << c << endl;\n}\n",
      HEAD + "int main() {\n    int n, k; cin >> n >> k;\n    int c = 0;\n    for (int i = 0; i < n; i++) { int x; cin >> x; if (x >= k) c++; }\n"
      "    cout << c << endl;\n}\n"),
    C("float_statistic", 0,
      HEAD + "int main() {\n    int n; cin >> n;\n    long long s = 0;\n    for (int i = 0; i < n; i++) { long long x; cin >> x; s += x; }\n"
      "    printf(\"%.6f\\n\", (double)s / n);\n}\n",
      HEAD + "int main() {\n    int n; cin >> n;\n    long long s = 0;\n    for (int i = 0; i < n; i++) { long long x; cin >> x; s += x; }\n"
      "    printf(\"%.6f\\n\", (double)(s / n));\n}\n"),
    C("range_queries", 0,
      HEAD + "int main() {\n    int n, q; cin >> n >> q;\n    vector<long long> p(n + 1, 0);\n"
      "    for (int i = 1; i <= n; i++) { long long x; cin >> x; p[i] = p[i - 1] + x; }\n"
      "    while (q--) { int l, r; cin >> l >> r; cout << p[r] - p[l - 1] << \"\\n\"; }\n}\n",
      HEAD + "int main() {\n    int n, q; cin >> n >> q;\n    vector<long long> p(n + 1, 0);\n"
      "    for (int i = 1; i <= n; i++) { long long x; cin >> x; p[i] = p[i - 1] + x; }\n"
      "    while (q--) { int l, r; cin >> l >> r; cout << p[r] - p[l] << \"\\n\"; }\n}\n"),
    C("sorted_output", 1,
      HEAD + "int main() {\n    int n; cin >> n;\n    vector<int> a(n);\n    for (auto& x : a) cin >> x;\n"
      "    sort(a.rbegin(), a.rend());\n    for (int i = 0; i < n; i++) cout << a[i] << (i + 1 < n ? ' ' : '\\n');\n}\n",
      HEAD + "int main() {\n    int n; cin >> n;\n    vector<int> a(n);\n    for (auto& x : a) cin >> x;\n"
      "    sort(a.begin(), a.end());\n    for (int i = 0; i < n; i++) cout << a[i] << (i + 1 < n ? ' ' : '\\n');\n}\n"),
    C("max_subarray", 0,
      HEAD + "int main() {\n    int n; cin >> n;\n    long long best, cur; cin >> best; cur = best;\n"
      "    for (int i = 1; i < n; i++) { long long x; cin >> x; cur = max(x, cur + x); best = max(best, cur); }\n"
      "    cout << best << endl;\n}\n",
      HEAD + "int main() {\n    int n; cin >> n;\n    long long best = 0, cur = 0;\n"
      "    for (int i = 0; i < n; i++) { long long x; cin >> x; cur = max(0LL, cur + x); best = max(best, cur); }\n"
      "    cout << best << endl;\n}\n"),
    C("robot_walk", 0,
      HEAD + "int main() {\n    string s; cin >> s;\n    int x = 0, y = 0;\n"
      "    for (char c : s) { if (c == 'U') y++; else if (c == 'D') y--; else if (c == 'L') x--; else x++; }\n"
      "    cout << x << ' ' << y << endl;\n}\n",
      HEAD + "int main() {\n    string s; cin >> s;\n    int x = 0, y = 0;\n"
      "    for (char c : s) { if (c == 'U' || c == 'D') y++; else if (c == 'L') x--; else x++; }\n"
      "    cout << x << ' ' << y << endl;\n}\n"),
    C("pair_gcd", 0,
      HEAD + "int main() {\n    int t; cin >> t;\n    while (t--) { long long a, b; cin >> a >> b;\n"
      "        while (b) { long long r = a % b; a = b; b = r; }\n        cout << a << \"\\n\"; }\n}\n",
      HEAD + "int main() {\n    int t; cin >> t;\n    while (t--) { long long a, b; cin >> a >> b;\n"
      "        long long lo = min(a, b), hi = max(a, b);\n        cout << (hi % lo == 0 ? lo : 1) << \"\\n\"; }\n}\n"),
    C("leap_years", 0,
      HEAD + "int main() {\n    int t; cin >> t;\n    while (t--) { int y; cin >> y;\n"
      "        bool leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);\n        cout << (leap ? \"YES\" : \"NO\") << \"\\n\"; }\n}\n",
      HEAD + "int main() {\n    int t; cin >> t;\n    while (t--) { int y; cin >> y;\n"
      "        bool leap = y % 4 == 0;\n        cout << (leap ? \"YES\" : \"NO\") << \"\\n\"; }\n}\n"),
    C("line_transform", 0,
      HEAD + "int main() {\n    vector<string> w; string s;\n    while (cin >> s) w.push_back(s);\n"
      "    reverse(w.begin(), w.end());\n    for (size_t i = 0; i < w.size(); i++) cout << w[i] << (i + 1 < w.size() ? ' ' : '\\n');\n}\n",
      HEAD + "int main() {\n    vector<string> w; string s;\n    while (cin >> s) { reverse(s.begin(), s.end()); w.push_back(s); }\n"
      "    for (size_t i = 0; i < w.size(); i++) cout << w[i] << (i + 1 < w.size() ? ' ' : '\\n');\n}\n"),
    C("knapsack", 0,
      HEAD + "int main() {\n    int n, w; cin >> n >> w;\n    vector<long long> best(w + 1, 0);\n"
      "    for (int i = 0; i < n; i++) { int wt; long long v; cin >> wt >> v;\n"
      "        for (int c = w; c >= wt; c--) best[c] = max(best[c], best[c - wt] + v); }\n    cout << best[w] << endl;\n}\n",
      HEAD + "int main() {\n    int n, w; cin >> n >> w;\n    vector<long long> best(w + 1, 0);\n"
      "    for (int i = 0; i < n; i++) { int wt; long long v; cin >> wt >> v;\n"
      "        for (int c = wt; c <= w; c++) best[c] = max(best[c], best[c - wt] + v); }\n    cout << best[w] << endl;\n}\n"),
    C("digit_facts", 0,
      HEAD + "int main() {\n    int t; cin >> t;\n    while (t--) { string s; cin >> s; int d = 0;\n"
      "        for (char c : s) d += c - '0';\n        cout << d << \"\\n\"; }\n}\n",
      HEAD + "int main() {\n    int t; cin >> t;\n    while (t--) { string s; cin >> s; int d = 0;\n"
      "        for (size_t i = 1; i < s.size(); i++) d += s[i] - '0';\n        cout << d << \"\\n\"; }\n}\n"),
)  # fmt: skip
