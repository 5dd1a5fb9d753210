def label(task: dict) -> str:
    mark = "X" if task["done"] else " "
    return f"[{mark}] {task['title']} (p{task['priority']})"
