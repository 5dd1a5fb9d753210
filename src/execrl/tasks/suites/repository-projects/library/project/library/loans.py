import datetime


def due_date(start: str, days: int = 14) -> str:
    """The ISO date `days` days after the ISO date `start`."""
    return (datetime.date.fromisoformat(start) + datetime.timedelta(days=days)).isoformat()


def fine_cents(days_late: int, per_day: int = 25, cap: int = 500) -> int:
    """Late fine: `per_day` cents per late day, at most `cap`; nothing when not late."""
    return min(cap, max(0, days_late) * per_day)


def days_late(due: str, returned: str) -> int:
    delta = datetime.date.fromisoformat(returned) - datetime.date.fromisoformat(due)
    return max(0, delta.days)
