def to_cents(amount: str) -> int:
    """Parse a price like '12.34', '7' or '0.5' into whole cents (1234, 700, 50)."""
    whole, _, frac = amount.partition(".")
    return int(whole) * 100 + int((frac + "00")[:2])


def format_cents(cents: int, symbol: str = "$") -> str:
    """Format cents as money: 1234 -> '$12.34', -50 -> '-$0.50'."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{symbol}{cents // 100}.{cents % 100:02d}"
