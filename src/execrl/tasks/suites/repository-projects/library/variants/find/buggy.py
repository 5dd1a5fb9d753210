def find(books: list[dict], query: str) -> list[dict]:
    q = query.lower()
    return [b for b in books if q in b["title"].lower()]
