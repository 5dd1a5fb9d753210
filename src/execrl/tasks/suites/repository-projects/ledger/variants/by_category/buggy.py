def by_category(entries: list[tuple[str, str, int]]) -> dict[str, int]:
    out = {}
    for date, _, cents in entries:
        out[date] = out.get(date, 0) + cents
    return out
