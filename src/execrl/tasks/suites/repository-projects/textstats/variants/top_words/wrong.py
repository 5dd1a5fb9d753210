def top_words(text: str, count: int = 3) -> list[tuple[str, int]]:
    counts = word_counts(text)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:count]
