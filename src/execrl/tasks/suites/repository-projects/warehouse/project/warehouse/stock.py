def restock(stock: dict[str, int], sku: str, qty: int) -> dict[str, int]:
    """A new stock dict with `qty` more of `sku` (the given dict is not changed)."""
    out = dict(stock)
    out[sku] = out.get(sku, 0) + qty
    return out


def take(stock: dict[str, int], sku: str, qty: int) -> dict[str, int]:
    """A new stock dict with `qty` fewer of `sku`; raises ValueError if there are not enough."""
    have = stock.get(sku, 0)
    if qty > have:
        raise ValueError(f"only {have} of {sku}")
    out = dict(stock)
    out[sku] = have - qty
    return out


def low_stock(stock: dict[str, int], threshold: int = 5) -> list[str]:
    """SKUs with fewer than `threshold` items, sorted."""
    return sorted(sku for sku, n in stock.items() if n < threshold)
