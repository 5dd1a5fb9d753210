from grades.roster import parse_roster, raw_and_curved, report

TEXT = "Ann: 90, 85\n Bob : 70,61\nCleo:\n"


def test_parse_roster():
    assert parse_roster("Ann: 90, 85\n Bob : 70,61\n") == {"Ann": [90, 85], "Bob": [70, 61]}


def test_report():
    assert report(TEXT) == ["Ann: 87.5 B", "Bob: 65.5 D", "Cleo: n/a"]


def test_report_with_bonus():
    assert report(TEXT, bonus=10) == ["Ann: 97.5 A", "Bob: 75.5 C", "Cleo: n/a"]


def test_raw_and_curved():
    assert raw_and_curved([80, 95], 10) == (87.5, 95.0)
