def pending(tasks: list[dict]) -> list[dict]:
    tasks.sort(key=lambda t: t["priority"])
    return [t for t in tasks if not t["done"]]
