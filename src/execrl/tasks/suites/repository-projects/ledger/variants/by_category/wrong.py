def by_category(entries: list[tuple[str, str, int]]) -> dict[str, int]:
    return {category: cents for _, category, cents in entries}
