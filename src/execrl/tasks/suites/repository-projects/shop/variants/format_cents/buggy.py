def format_cents(cents: int, symbol: str = "$") -> str:
    return f"{symbol}{cents // 100}.{cents % 100}"
