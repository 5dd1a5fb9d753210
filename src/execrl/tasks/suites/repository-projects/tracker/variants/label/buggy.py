def label(task: dict) -> str:
    return f"[{'x' if task['done'] else ''}] {task['title']} (p{task['priority']})"
