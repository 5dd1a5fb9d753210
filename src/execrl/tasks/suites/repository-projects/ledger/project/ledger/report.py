from ledger.summary import by_category, load, monthly


def money(cents: int) -> str:
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"


def report(text: str) -> list[str]:
    entries = load(text)
    lines = [f"{cat}: {money(total)}" for cat, total in sorted(by_category(entries).items())]
    lines += [f"{month}: {money(total)}" for month, total in sorted(monthly(entries).items())]
    return lines
