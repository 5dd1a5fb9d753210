from tracker.model import label
from tracker.store import by_tag, load, pending


def agenda(text: str) -> list[str]:
    """The pending tasks first, then every task in file order."""
    tasks = load(text)
    todo = [label(t) for t in pending(tasks)]
    return ["TODO:"] + todo + ["ALL:"] + [label(t) for t in tasks]


def tag_line(text: str, tag: str) -> str:
    return f"{tag}: " + "; ".join(by_tag(load(text)).get(tag, []))
