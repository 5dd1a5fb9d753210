from library.loans import days_late, due_date, fine_cents


def test_due_date():
    assert due_date("2024-02-20", 14) == "2024-03-05"
    assert due_date("2023-12-30", 3) == "2024-01-02"


def test_fine_cents():
    assert fine_cents(3) == 75
    assert fine_cents(0) == 0


def test_days_late():
    assert days_late("2024-01-10", "2024-01-13") == 3
