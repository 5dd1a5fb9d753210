def due_date(start: str, days: int) -> str:
    return (datetime.date.fromisoformat(start) + datetime.timedelta(days=days)).isoformat()
