def words(text: str) -> list[str]:
    out = []
    current = ""
    for ch in text.lower():
        if ch.isalpha() or ch == "'":
            current += ch
        elif current:
            out.append(current)
            current = ""
    return out
