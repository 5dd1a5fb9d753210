from textstats.tokens import sentences, words


def word_counts(text: str) -> dict[str, int]:
    """How often each word occurs."""
    counts: dict[str, int] = {}
    for w in words(text):
        counts[w] = counts.get(w, 0) + 1
    return counts


def top_words(text: str, n: int = 3) -> list[tuple[str, int]]:
    """The n most frequent (word, count) pairs, most frequent first, ties alphabetical."""
    counts = word_counts(text)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]


def words_per_sentence(text: str) -> float:
    """Average number of words per sentence (0.0 for no sentences)."""
    parts = sentences(text)
    return len(words(text)) / len(parts) if parts else 0.0
