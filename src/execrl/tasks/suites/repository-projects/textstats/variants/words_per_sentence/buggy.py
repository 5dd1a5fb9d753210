def words_per_sentence(text: str) -> float:
    parts = sentences(text)
    return len(words(text)) // len(parts) if parts else 0.0
