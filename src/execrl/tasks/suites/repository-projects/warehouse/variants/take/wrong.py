def take(stock: dict[str, int], sku: str, qty: int) -> dict[str, int]:
    out = dict(stock)
    out[sku] = max(0, out.get(sku, 0) - qty)
    return out
