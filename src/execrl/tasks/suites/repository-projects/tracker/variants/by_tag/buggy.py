def by_tag(tasks: list[dict]) -> dict[str, list[str]]:
    out = {}
    for t in tasks:
        for tag in t["tags"]:
            out[tag] = [t["title"]]
    return out
