def normalize_isbn(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())
