"""Repository project: a task tracker (parse, store and render to-do lines)."""

from __future__ import annotations

from execrl.tasks.suites._repo_core import Project, Target

TRACKER = Project(
    name="tracker",
    files={
        "tracker/model.py": '''
            def parse_task(line: str) -> dict:
                """Parse '[x] Buy milk @home !2' into a task dict.

                '[x] ' marks a done task ('[ ] ' an open one), '@word' is a tag and '!N' the priority (an int,
                default 3). The title is the remaining words joined by single spaces.
                """
                done = line.startswith("[x]")
                tags, title, priority = [], [], 3
                for part in line[3:].split():
                    if part.startswith("@"):
                        tags.append(part[1:])
                    elif part.startswith("!") and part[1:].isdigit():
                        priority = int(part[1:])
                    else:
                        title.append(part)
                return {"title": " ".join(title), "done": done, "tags": tags, "priority": priority}


            def label(task: dict) -> str:
                """How a task is shown: '[x] Buy milk (p2)'."""
                return f"[{'x' if task['done'] else ' '}] {task['title']} (p{task['priority']})"
        ''',
        "tracker/store.py": '''
            from tracker.model import parse_task


            def load(text: str) -> list[dict]:
                """One task per non-empty line."""
                return [parse_task(line) for line in text.splitlines() if line.strip()]


            def pending(tasks: list[dict]) -> list[dict]:
                """Open tasks, most urgent (lowest priority number) first; ties keep their order."""
                return sorted((t for t in tasks if not t["done"]), key=lambda t: t["priority"])


            def by_tag(tasks: list[dict]) -> dict[str, list[str]]:
                """Titles of the tasks carrying each tag, in task order."""
                out: dict[str, list[str]] = {}
                for t in tasks:
                    for tag in t["tags"]:
                        out.setdefault(tag, []).append(t["title"])
                return out
        ''',
        "tracker/views.py": '''
            from tracker.model import label
            from tracker.store import by_tag, load, pending


            def agenda(text: str) -> list[str]:
                """The pending tasks first, then every task in file order."""
                tasks = load(text)
                todo = [label(t) for t in pending(tasks)]
                return ["TODO:"] + todo + ["ALL:"] + [label(t) for t in tasks]


            def tag_line(text: str, tag: str) -> str:
                return f"{tag}: " + "; ".join(by_tag(load(text)).get(tag, []))
        ''',
        "tests/test_model.py": '''
            from tracker.model import label, parse_task


            def test_parse_task():
                t = parse_task("[x] Buy milk @home !2")
                assert t["title"] == "Buy milk" and t["done"] is True and t["tags"] == ["home"]
                assert parse_task("[ ] Call Bob")["title"] == "Call Bob"


            def test_label():
                assert label({"title": "Pay rent", "done": False, "tags": [], "priority": 1}) == "[ ] Pay rent (p1)"
        ''',
        "tests/test_store.py": '''
            from tracker.store import by_tag, load, pending

            TEXT = "[ ] Write report @work !1\\n[x] Buy milk @home\\n[ ] Fix bike @home !2\\n"


            def test_pending():
                assert [t["title"] for t in pending(load(TEXT))] == ["Write report", "Fix bike"]


            def test_by_tag():
                assert by_tag(load(TEXT)) == {"work": ["Write report"], "home": ["Buy milk", "Fix bike"]}
        ''',
        "tests/test_views.py": '''
            from tracker.views import agenda, tag_line

            TEXT = "[ ] Fix bike @home !2\\n[ ] Plan trip !10\\n[x] Buy milk @home\\n[ ] Write report @work !1\\n"


            def test_agenda():
                assert agenda(TEXT) == [
                    "TODO:", "[ ] Write report (p1)", "[ ] Fix bike (p2)", "[ ] Plan trip (p10)",
                    "ALL:", "[ ] Fix bike (p2)", "[ ] Plan trip (p10)", "[x] Buy milk (p3)", "[ ] Write report (p1)",
                ]


            def test_tag_line():
                assert tag_line(TEXT, "home") == "home: Fix bike; Buy milk"
        ''',
    },
    targets=(
        Target("tracker/model.py", "parse_task",
               "it parses a line like '[x] Buy milk @home !2' into a dict with 'title', 'done' (bool), 'tags' "
               "(list of tags without '@') and 'priority' (an int from '!N', default 3).",
               wrong='''
                   def parse_task(line: str) -> dict:
                       done = line.startswith("[x]")
                       tags, title, priority = [], [], "3"
                       for part in line[3:].split():
                           if part.startswith("@"):
                               tags.append(part[1:])
                           elif part.startswith("!"):
                               priority = part[1:]
                           else:
                               title.append(part)
                       return {"title": " ".join(title), "done": done, "tags": tags, "priority": priority}
               ''',
               buggy='''
                   def parse_task(line: str) -> dict:
                       done = line.startswith("[x]")
                       tags, title, priority = [], [], 3
                       for part in line.split():
                           if part.startswith("@"):
                               tags.append(part)
                           elif part.startswith("!"):
                               priority = int(part[1:])
                           else:
                               title.append(part)
                       return {"title": " ".join(title), "done": done, "tags": tags, "priority": priority}
               ''',
               own_tests=("tests/test_model.py::test_parse_task",), difficulty=3),
        Target("tracker/store.py", "pending",
               "it returns the tasks that are not done, sorted by priority (lowest number first), keeping the "
               "file order for equal priorities, without changing the list it was given.",
               wrong='''
                   def pending(tasks: list[dict]) -> list[dict]:
                       tasks.sort(key=lambda t: t["priority"])
                       return [t for t in tasks if not t["done"]]
               ''',
               buggy='''
                   def pending(tasks: list[dict]) -> list[dict]:
                       return sorted((t for t in tasks if not t["done"]), key=lambda t: t["priority"], reverse=True)
               ''',
               own_tests=("tests/test_store.py::test_pending",)),
        Target("tracker/store.py", "by_tag",
               "it returns a dict from each tag to the list of titles of the tasks carrying it, in task order.",
               wrong='''
                   def by_tag(tasks: list[dict]) -> dict[str, list[str]]:
                       out = {}
                       for t in tasks:
                           for tag in t["tags"]:
                               out.setdefault(tag, []).append(t["title"])
                       return {tag: sorted(titles) for tag, titles in out.items()}
               ''',
               buggy='''
                   def by_tag(tasks: list[dict]) -> dict[str, list[str]]:
                       out = {}
                       for t in tasks:
                           for tag in t["tags"]:
                               out[tag] = [t["title"]]
                       return out
               ''',
               own_tests=("tests/test_store.py::test_by_tag",)),
        Target("tracker/model.py", "label",
               "it renders a task as '[x] Title (pN)' for done tasks and '[ ] Title (pN)' for open ones.",
               wrong='''
                   def label(task: dict) -> str:
                       mark = "X" if task["done"] else " "
                       return f"[{mark}] {task['title']} (p{task['priority']})"
               ''',
               buggy='''
                   def label(task: dict) -> str:
                       return f"[{'x' if task['done'] else ''}] {task['title']} (p{task['priority']})"
               ''',
               own_tests=("tests/test_model.py::test_label",)),
    ),
)  # fmt: skip
