def to_cents(amount: str) -> int:
    return int(float(amount) * 100)
