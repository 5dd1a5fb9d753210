from shop.pricing import apply_discount, line_total


def test_line_total():
    assert line_total("2.50", 3) == 750


def test_apply_discount():
    assert apply_discount(1000, 15) == 850
    assert apply_discount(2000, 50) == 1000
