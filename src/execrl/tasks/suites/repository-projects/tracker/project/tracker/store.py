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
