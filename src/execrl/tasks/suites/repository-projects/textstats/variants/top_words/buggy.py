def top_words(text: str, n: int = 3) -> list[tuple[str, int]]:
    counts = word_counts(text)
    return sorted(counts.items(), key=lambda item: item[1], reverse=True)[:n - 1]
