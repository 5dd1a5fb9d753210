def due_date(start: str) -> str:
    """The ISO date 14 days after the ISO date `start`."""
    return (datetime.date.fromisoformat(start) + datetime.timedelta(days=14)).isoformat()
