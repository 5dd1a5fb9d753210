def fine_cents(days_late: int, per_day: int = 25, cap: int = 500) -> int:
    return min(cap, days_late * per_day) + per_day
