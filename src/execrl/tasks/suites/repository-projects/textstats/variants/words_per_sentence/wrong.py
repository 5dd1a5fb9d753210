def words_per_sentence(text: str) -> float:
    parts = sentences(text)
    return len(text.split()) / len(parts) if parts else 0.0
