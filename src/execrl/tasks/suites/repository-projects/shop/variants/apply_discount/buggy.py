def apply_discount(total_cents: int, percent: int) -> int:
    return total_cents * percent // 100
