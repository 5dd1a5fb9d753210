from library.catalog import find, normalize_isbn
from library.loans import days_late, due_date, fine_cents


def checkout(loans: dict[str, str], isbn: str, today: str) -> str:
    """Record a loan and return the receipt line."""
    key = normalize_isbn(isbn)
    loans[key] = due_date(today)
    return f"{key} due {loans[key]}"


def give_back(loans: dict[str, str], isbn: str, today: str) -> str:
    due = loans.pop(normalize_isbn(isbn))
    fine = fine_cents(days_late(due, today))
    return f"fine {fine // 100}.{fine % 100:02d}" if fine else "thank you"


def search_line(books: list[dict], query: str) -> str:
    return " | ".join(b["title"] for b in find(books, query)) or "no match"
