from tracker.views import agenda, tag_line

TEXT = "[ ] Fix bike @home !2\n[ ] Plan trip !10\n[x] Buy milk @home\n[ ] Write report @work !1\n"


def test_agenda():
    assert agenda(TEXT) == [
        "TODO:", "[ ] Write report (p1)", "[ ] Fix bike (p2)", "[ ] Plan trip (p10)",
        "ALL:", "[ ] Fix bike (p2)", "[ ] Plan trip (p10)", "[x] Buy milk (p3)", "[ ] Write report (p1)",
    ]


def test_tag_line():
    assert tag_line(TEXT, "home") == "home: Fix bike; Buy milk"
