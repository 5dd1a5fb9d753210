def find(books: list[dict], query: str) -> list[dict]:
    hits = [b for b in books if query in b["title"] or query in b["author"]]
    return sorted(hits, key=lambda b: b["title"])
