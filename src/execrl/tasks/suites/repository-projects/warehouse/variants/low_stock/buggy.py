def low_stock(stock: dict[str, int], threshold: int = 5) -> list[str]:
    return [sku for sku, n in stock.items() if n <= threshold]
