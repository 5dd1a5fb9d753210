def to_cents(amount: str) -> int:
    whole, _, frac = amount.partition(".")
    return int(whole) * 100 + int(frac or 0)
