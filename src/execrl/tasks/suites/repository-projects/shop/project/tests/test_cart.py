from shop.cart import cart_total, receipt

ITEMS = [("tea", "3.99", 2), ("cake", "19.99", 1), ("jam", "0.29", 3)]


def test_cart_total():
    assert cart_total(ITEMS) == 798 + 1999 + 87


def test_cart_total_with_discount():
    assert cart_total(ITEMS, 10) == 2884 - 288


def test_receipt():
    assert receipt(ITEMS, 10) == ["tea x2: $7.98", "cake x1: $19.99", "jam x3: $0.87", "TOTAL: $25.96"]
