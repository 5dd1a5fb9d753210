from ledger.summary import by_category, monthly

ENTRIES = [("2024-01-05", "food", -450), ("2024-01-20", "pay", 10000), ("2024-02-01", "food", -50)]


def test_by_category():
    assert by_category(ENTRIES[:2]) == {"food": -450, "pay": 10000}


def test_monthly():
    assert monthly(ENTRIES) == {"2024-01": 9550, "2024-02": -50}
