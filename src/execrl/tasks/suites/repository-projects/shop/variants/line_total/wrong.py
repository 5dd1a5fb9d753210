def line_total(price: str, qty: int) -> int:
    return to_cents(price) * qty
