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
