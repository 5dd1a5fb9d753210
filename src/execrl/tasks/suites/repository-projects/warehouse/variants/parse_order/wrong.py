def parse_order(text: str) -> list[tuple[str, int]]:
    out = []
    for part in text.split(", "):
        count, _, sku = part.partition("x ")
        out.append((sku, int(count)))
    return out
