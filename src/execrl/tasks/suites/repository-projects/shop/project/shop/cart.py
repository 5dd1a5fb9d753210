from shop.money import format_cents
from shop.pricing import apply_discount, line_total


def cart_total(items: list[tuple[str, str, int]], discount_percent: int = 0) -> int:
    """Total in cents of (name, price, quantity) items after the discount."""
    subtotal = sum(line_total(price, quantity=qty) for _, price, qty in items)
    return apply_discount(subtotal, discount_percent)


def receipt(items: list[tuple[str, str, int]], discount_percent: int = 0) -> list[str]:
    """One line per item and a final TOTAL line."""
    lines = [f"{name} x{qty}: {format_cents(line_total(price, quantity=qty))}" for name, price, qty in items]
    lines.append(f"TOTAL: {format_cents(cart_total(items, discount_percent))}")
    return lines
