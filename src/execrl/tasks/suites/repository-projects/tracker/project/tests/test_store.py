from tracker.store import by_tag, load, pending

TEXT = "[ ] Write report @work !1\n[x] Buy milk @home\n[ ] Fix bike @home !2\n"


def test_pending():
    assert [t["title"] for t in pending(load(TEXT))] == ["Write report", "Fix bike"]


def test_by_tag():
    assert by_tag(load(TEXT)) == {"work": ["Write report"], "home": ["Buy milk", "Fix bike"]}
