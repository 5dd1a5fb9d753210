from shop.money import to_cents


def line_total(price: str, quantity: int) -> int:
    """Total of one cart line in cents."""
    return to_cents(price) * quantity


def apply_discount(total_cents: int, percent: int) -> int:
    """The total after a percentage discount; the discount is rounded down to whole cents."""
    return total_cents - total_cents * percent // 100
