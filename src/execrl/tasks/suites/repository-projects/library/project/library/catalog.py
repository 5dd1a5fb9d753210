def normalize_isbn(text: str) -> str:
    """Drop spaces and hyphens and upper-case a final 'x': '0-306-40615-x' -> '030640615X'."""
    return text.replace("-", "").replace(" ", "").upper()


def find(books: list[dict], query: str) -> list[dict]:
    """Books whose title or author contains `query`, ignoring case, sorted by title."""
    q = query.lower()
    hits = [b for b in books if q in b["title"].lower() or q in b["author"].lower()]
    return sorted(hits, key=lambda b: b["title"])
