def restock(stock: dict[str, int], sku: str, qty: int) -> dict[str, int]:
    out = dict(stock)
    out[sku] = qty
    return out
