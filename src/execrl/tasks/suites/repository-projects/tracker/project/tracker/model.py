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
