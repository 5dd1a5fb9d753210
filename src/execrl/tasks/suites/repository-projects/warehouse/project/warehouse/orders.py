from warehouse.stock import low_stock, restock, take


def parse_order(text: str) -> list[tuple[str, int]]:
    """'3x apple, 2x pear' -> [('apple', 3), ('pear', 2)]."""
    out = []
    for part in text.split(","):
        count, _, sku = part.strip().partition("x ")
        out.append((sku.strip(), int(count)))
    return out


def fulfil(stock: dict[str, int], text: str) -> tuple[dict[str, int], list[str]]:
    """Take every line of the order that can be served; return the new stock and the missing SKUs."""
    missing = []
    for sku, qty in parse_order(text):
        try:
            stock = take(stock, sku, qty)
        except ValueError:
            missing.append(sku)
    return stock, missing


def reorder_list(stock: dict[str, int]) -> list[str]:
    return [f"reorder {sku}" for sku in low_stock(stock)]


def receive(stock: dict[str, int], deliveries: list[tuple[str, int]]) -> tuple[dict[str, int], int]:
    """Apply deliveries; also return how many units arrived in total."""
    before = sum(stock.values())
    for sku, qty in deliveries:
        stock = restock(stock, sku, qty)
    return stock, sum(stock.values()) - before
