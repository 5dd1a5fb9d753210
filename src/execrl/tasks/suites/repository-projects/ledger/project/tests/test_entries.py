from ledger.entries import parse_amount, parse_entry


def test_parse_amount():
    assert parse_amount("-45.20") == -4520
    assert parse_amount("12") == 1200


def test_parse_entry():
    assert parse_entry("2024-01-05 rent -900.00") == ("2024-01-05", "rent", -90000)
