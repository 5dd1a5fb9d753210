def normalize_isbn(text: str) -> str:
    return text.replace("-", "")
