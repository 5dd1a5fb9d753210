from textstats.stats import top_words, words_per_sentence


def summary(text: str) -> str:
    """A one-line summary used by the command line tool."""
    top = ", ".join(f"{w}={c}" for w, c in top_words(text, n=2))
    return f"top: {top}; words/sentence: {words_per_sentence(text):.1f}"
