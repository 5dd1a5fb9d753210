def restock(stock: dict[str, int], sku: str, qty: int) -> dict[str, int]:
    stock[sku] = stock.get(sku, 0) + qty
    return stock
