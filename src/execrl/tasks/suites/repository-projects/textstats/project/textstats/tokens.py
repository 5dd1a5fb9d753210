def words(text: str) -> list[str]:
    """Lower-cased words: runs of letters and apostrophes; everything else separates words."""
    out = []
    current = ""
    for ch in text.lower() + " ":
        if ch.isalpha() or ch == "'":
            current += ch
        elif current:
            out.append(current)
            current = ""
    return out


def sentences(text: str) -> list[str]:
    """Sentences end with '.', '!' or '?'; returns them stripped, without empty ones."""
    out = []
    current = ""
    for ch in text:
        current += ch
        if ch in ".!?":
            if current.strip(" .!?"):
                out.append(current.strip())
            current = ""
    if current.strip():
        out.append(current.strip())
    return out
