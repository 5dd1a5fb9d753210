def due_date(start: str, days: int = 14) -> str:
    year, month, day = map(int, start.split("-"))
    return f"{year:04d}-{month:02d}-{day + days:02d}"
