from ledger.entries import parse_entry


def load(text: str) -> list[tuple[str, str, int]]:
    return [parse_entry(line) for line in text.splitlines() if line.strip()]


def by_category(entries: list[tuple[str, str, int]]) -> dict[str, int]:
    """Total cents per category."""
    out: dict[str, int] = {}
    for _, category, cents in entries:
        out[category] = out.get(category, 0) + cents
    return out


def monthly(entries: list[tuple[str, str, int]]) -> dict[str, int]:
    """Total cents per month, keyed 'YYYY-MM'."""
    out: dict[str, int] = {}
    for date, _, cents in entries:
        out[date[:7]] = out.get(date[:7], 0) + cents
    return out
