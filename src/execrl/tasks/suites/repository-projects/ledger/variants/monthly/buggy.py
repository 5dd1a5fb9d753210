def monthly(entries: list[tuple[str, str, int]]) -> dict[str, int]:
    out = {}
    for date, _, cents in entries:
        out[date[:7]] = cents
    return out
