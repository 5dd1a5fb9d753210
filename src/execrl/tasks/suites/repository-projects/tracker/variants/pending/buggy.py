def pending(tasks: list[dict]) -> list[dict]:
    return sorted((t for t in tasks if not t["done"]), key=lambda t: t["priority"], reverse=True)
