from tracker.model import label, parse_task


def test_parse_task():
    t = parse_task("[x] Buy milk @home !2")
    assert t["title"] == "Buy milk" and t["done"] is True and t["tags"] == ["home"]
    assert parse_task("[ ] Call Bob")["title"] == "Call Bob"


def test_label():
    assert label({"title": "Pay rent", "done": False, "tags": [], "priority": 1}) == "[ ] Pay rent (p1)"
