def low_stock(stock: dict[str, int], threshold: int) -> list[str]:
    return sorted(sku for sku, n in stock.items() if n < threshold)
