def low_stock(stock: dict[str, int]) -> list[str]:
    """SKUs with fewer than 5 items, sorted."""
    return sorted(sku for sku, n in stock.items() if n < 5)
