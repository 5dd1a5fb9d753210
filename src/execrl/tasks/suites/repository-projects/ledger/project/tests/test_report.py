from ledger.report import report

TEXT = "2024-01-05 Food -4.5\n2024-01-20 pay 100\n2024-02-01 food -0.07\n2023-12-31 pay 19.99\n"


def test_report():
    assert report(TEXT) == ["food: -4.57", "pay: 119.99", "2023-12: 19.99", "2024-01: 95.50", "2024-02: -0.07"]
