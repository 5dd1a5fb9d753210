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
