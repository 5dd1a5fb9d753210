def sentences(text: str) -> list[str]:
    out = []
    current = ""
    for ch in text:
        current += ch
        if ch in ".!?":
            out.append(current.strip())
            current = ""
    if current.strip():
        out.append(current.strip())
    return out
