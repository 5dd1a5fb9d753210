def by_tag(tasks: list[dict]) -> dict[str, list[str]]:
    out = {}
    for t in tasks:
        for tag in t["tags"]:
            out.setdefault(tag, []).append(t["title"])
    return {tag: sorted(titles) for tag, titles in out.items()}
