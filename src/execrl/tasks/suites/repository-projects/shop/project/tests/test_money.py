from shop.money import format_cents, to_cents


def test_to_cents():
    assert to_cents("12.34") == 1234
    assert to_cents("7") == 700
    assert to_cents("0.5") == 50


def test_format_cents():
    assert format_cents(1234, "$") == "$12.34"
    assert format_cents(5, "$") == "$0.05"
    assert format_cents(-50, "EUR ") == "-EUR 0.50"
