def fine_cents(days_late: int, per_day: int = 25, cap: int = 500) -> int:
    return max(0, days_late) * per_day
