def parse_amount(text: str) -> int:
    """'-45.20' -> -4520 cents; '12' -> 1200; '3.5' -> 350."""
    sign = -1 if text.startswith("-") else 1
    whole, _, frac = text.lstrip("+-").partition(".")
    return sign * (int(whole) * 100 + int((frac + "00")[:2]))


def parse_entry(line: str) -> tuple[str, str, int]:
    """'2024-01-05 Groceries -45.20' -> ('2024-01-05', 'groceries', -4520)."""
    date, category, amount = line.split()
    return date, category.lower(), parse_amount(amount)
