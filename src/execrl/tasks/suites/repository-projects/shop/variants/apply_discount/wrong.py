def apply_discount(total_cents: int, percent: int) -> int:
    return total_cents * (100 - percent) / 100
