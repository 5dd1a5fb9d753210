"""Hand-written function bodies of the ``functions-<lang>`` suites: per template, per language, the
reference and the wrong body (the Python template's bug, ported: the same hidden tests catch it).

Only the body is written here; ``multipl.py`` wraps it in the language's signature (and Java's class).
"""

from __future__ import annotations

# template -> language -> (reference body, wrong body)
Bodies = dict[str, dict[str, tuple[str, str]]]

LIST_BODIES: Bodies = {
    "sum_list": {
        "javascript": (
            "return nums.reduce((a, b) => a + b, 0);",
            "let total = 0;\nfor (let i = 0; i < nums.length - 1; i++) total += nums[i];\nreturn total;",
        ),
        "java": (
            "long total = 0;\nfor (long x : nums) total += x;\nreturn total;",
            "long total = 0;\nfor (int i = 0; i < nums.size() - 1; i++) total += nums.get(i);\nreturn total;",
        ),
        "cpp": (
            "long long total = 0;\nfor (long long x : nums) total += x;\nreturn total;",
            "long long total = 0;\nfor (size_t i = 0; i + 1 < nums.size(); i++) total += nums[i];\nreturn total;",
        ),
    },
    "count_evens": {
        "javascript": (
            "return nums.filter((x) => x % 2 === 0).length;",
            "return nums.filter((x) => x % 2 === 0 && x > 0).length;",
        ),
        "java": (
            "long n = 0;\nfor (long x : nums) if (x % 2 == 0) n++;\nreturn n;",
            "long n = 0;\nfor (long x : nums) if (x % 2 == 0 && x > 0) n++;\nreturn n;",
        ),
        "cpp": (
            "long long n = 0;\nfor (long long x : nums) if (x % 2 == 0) n++;\nreturn n;",
            "long long n = 0;\nfor (long long x : nums) if (x % 2 == 0 && x > 0) n++;\nreturn n;",
        ),
    },
    "double_each": {
        "javascript": ("return nums.map((x) => x * 2);", "return nums.map((x) => x * x);"),
        "java": (
            "ArrayList<Long> out = new ArrayList<>();\nfor (long x : nums) out.add(x * 2);\nreturn out;",
            "ArrayList<Long> out = new ArrayList<>();\nfor (long x : nums) out.add(x * x);\nreturn out;",
        ),
        "cpp": (
            "vector<long long> out;\nfor (long long x : nums) out.push_back(x * 2);\nreturn out;",
            "vector<long long> out;\nfor (long long x : nums) out.push_back(x * x);\nreturn out;",
        ),
    },
    "contains_value": {
        "javascript": ("return nums.includes(target);", "return nums.slice(1).includes(target);"),
        "java": (
            "return nums.contains(target);",
            "return nums.subList(Math.min(1, nums.size()), nums.size()).contains(target);",
        ),
        "cpp": (
            "return find(nums.begin(), nums.end(), target) != nums.end();",
            "return !nums.empty() && find(nums.begin() + 1, nums.end(), target) != nums.end();",
        ),
    },
    "index_of": {
        "javascript": ("return nums.indexOf(target);", "return nums.lastIndexOf(target);"),
        "java": ("return nums.indexOf(target);", "return nums.lastIndexOf(target);"),
        "cpp": (
            "for (size_t i = 0; i < nums.size(); i++)\n    if (nums[i] == target) return (long long)i;\nreturn -1;",
            "long long found = -1;\nfor (size_t i = 0; i < nums.size(); i++)\n    if (nums[i] == target) found = (long long)i;\nreturn found;",
        ),
    },
    "sum_absolute": {
        "javascript": (
            "return nums.reduce((a, b) => a + Math.abs(b), 0);",
            "return Math.abs(nums.reduce((a, b) => a + b, 0));",
        ),
        "java": (
            "long total = 0;\nfor (long x : nums) total += Math.abs(x);\nreturn total;",
            "long total = 0;\nfor (long x : nums) total += x;\nreturn Math.abs(total);",
        ),
        "cpp": (
            "long long total = 0;\nfor (long long x : nums) total += llabs(x);\nreturn total;",
            "long long total = 0;\nfor (long long x : nums) total += x;\nreturn llabs(total);",
        ),
    },
}

STRING_BODIES: Bodies = {
    "reverse_string": {
        "javascript": (
            'return s.split("").reverse().join("");',
            'return s.slice(1).split("").reverse().join("");',
        ),
        "java": (
            "return new StringBuilder(s).reverse().toString();",
            "return s.isEmpty() ? s : new StringBuilder(s.substring(1)).reverse().toString();",
        ),
        "cpp": (
            "return string(s.rbegin(), s.rend());",
            "return s.empty() ? s : string(s.rbegin(), s.rend() - 1);",
        ),
    },
    "count_vowels": {
        "javascript": (
            'let n = 0;\nfor (const c of s) if ("aeiou".includes(c.toLowerCase())) n++;\nreturn n;',
            'let n = 0;\nfor (const c of s) if ("aeiou".includes(c)) n++;\nreturn n;',
        ),
        "java": (
            'long n = 0;\nfor (char c : s.toCharArray()) if ("aeiou".indexOf(Character.toLowerCase(c)) >= 0) n++;\nreturn n;',
            'long n = 0;\nfor (char c : s.toCharArray()) if ("aeiou".indexOf(c) >= 0) n++;\nreturn n;',
        ),
        "cpp": (
            'long long n = 0;\nfor (char c : s) if (string("aeiou").find((char)tolower((unsigned char)c)) != string::npos) n++;\nreturn n;',
            'long long n = 0;\nfor (char c : s) if (string("aeiou").find(c) != string::npos) n++;\nreturn n;',
        ),
    },
    "repeat_string": {
        "javascript": ("return s.repeat(n);", "return n > 1 ? s.repeat(n - 1) : s;"),
        "java": ("return s.repeat((int) n);", "return n > 1 ? s.repeat((int) n - 1) : s;"),
        "cpp": (
            "string out;\nfor (long long i = 0; i < n; i++) out += s;\nreturn out;",
            "if (n <= 1) return s;\nstring out;\nfor (long long i = 0; i < n - 1; i++) out += s;\nreturn out;",
        ),
    },
}

NUMBER_BODIES: Bodies = {
    "max_of_two": {
        "javascript": ("return a > b ? a : b;", "return a < b ? a : b;"),
        "java": ("return a > b ? a : b;", "return a < b ? a : b;"),
        "cpp": ("return a > b ? a : b;", "return a < b ? a : b;"),
    },
    "is_even": {
        "javascript": ("return n % 2 === 0;", "return n > 0 ? n % 2 === 0 : false;"),
        "java": ("return n % 2 == 0;", "return n > 0 ? n % 2 == 0 : false;"),
        "cpp": ("return n % 2 == 0;", "return n > 0 ? n % 2 == 0 : false;"),
    },
    "clamp": {
        "javascript": ("return Math.max(lo, Math.min(x, hi));", "return Math.max(lo, x);"),
        "java": ("return Math.max(lo, Math.min(x, hi));", "return Math.max(lo, x);"),
        "cpp": ("return max(lo, min(x, hi));", "return max(lo, x);"),
    },
}

BODIES: Bodies = {**LIST_BODIES, **STRING_BODIES, **NUMBER_BODIES}
