def parse_order(text: str) -> list[tuple[str, int]]:
    out = []
    for part in text.split(","):
        count, _, sku = part.strip().partition("x ")
        out.append((count, sku))
    return out
