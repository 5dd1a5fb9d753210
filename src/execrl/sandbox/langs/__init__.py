"""The built-in languages, one module per family; importing this package registers them all.

| module      | languages                 |
|-------------|---------------------------|
| ``scripts`` | python, bash              |
| ``native``  | c, cpp, rust, go          |
| ``node``    | javascript, typescript    |
| ``jvm``     | java                      |
"""

from execrl.sandbox.langs import jvm, native, node, scripts

__all__ = ["jvm", "native", "node", "scripts"]
