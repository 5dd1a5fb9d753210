from library.catalog import find, normalize_isbn

BOOKS = [{"title": "Dune", "author": "Herbert"}, {"title": "Emma", "author": "Austen"},
         {"title": "Persuasion", "author": "Austen"}]


def test_normalize_isbn():
    assert normalize_isbn("978-0-306-40615-7") == "9780306406157"


def test_find():
    assert [b["title"] for b in find(BOOKS, "Austen")] == ["Emma", "Persuasion"]
