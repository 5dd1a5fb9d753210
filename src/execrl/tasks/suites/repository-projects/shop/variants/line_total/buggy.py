def line_total(price: str, quantity: int) -> int:
    return to_cents(price) + quantity
