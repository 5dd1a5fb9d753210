"""What a program is written in and runs with: the language registry, the Python runtimes, Go's shared
build cache, and the built-in languages (importing this package registers them all).

| module      | role                                                                           |
|-------------|--------------------------------------------------------------------------------|
| ``registry``| ``Language``, ``register_language``: adding a language is one call             |
| ``runtimes``| Python runtimes: ``python`` (standard library), ``python-data`` (numpy, pandas) |
| ``gocache`` | Go's warm, read-only standard-library cache, built on the host once            |
| ``scripts`` | python, bash                                                                   |
| ``native``  | c, cpp, rust, go                                                               |
| ``node``    | javascript, typescript                                                         |
| ``jvm``     | java                                                                           |

A layer of the sandbox (pyproject.toml's contract): the API, sessions and the host engine use it; it uses
only the sandbox's ``types`` and ``errors`` and, to build Go's cache with the jail's environment, the
zygote's ``jail.ENV``. Inside it the arrows point one way: the built-in languages and ``runtimes`` import
``registry``, ``native`` imports ``gocache``, which imports ``runtimes``; ``registry`` imports none of
them, so the built-ins are registered here, by the package (issue 36: the registry, then the sandbox's
``languages`` module, imported the built-ins, which imported it back, a circle through the Go cache,
then in ``host/``, and the runtimes).
"""

from execrl.sandbox.langs import jvm, native, node, scripts  # importing them registers them
from execrl.sandbox.langs.registry import (
    Language,
    available_languages,
    describe_languages,
    get_language,
    list_languages,
    register_language,
)
from execrl.sandbox.langs.runtimes import (
    DEFAULT_RUNTIME,
    Runtime,
    get_runtime,
    list_runtimes,
    register_runtime,
    resolve_runtime,
)

__all__ = [
    "DEFAULT_RUNTIME",
    "Language",
    "Runtime",
    "available_languages",
    "describe_languages",
    "get_language",
    "get_runtime",
    "jvm",
    "list_languages",
    "list_runtimes",
    "native",
    "node",
    "register_language",
    "register_runtime",
    "resolve_runtime",
    "scripts",
]
