from library.desk import checkout, give_back, search_line

BOOKS = [{"title": "Persuasion", "author": "Austen"}, {"title": "Emma", "author": "Austen"},
         {"title": "Dune", "author": "Herbert"}]


def test_checkout_and_return():
    loans = {}
    assert checkout(loans, "0-306-40615-x", "2024-01-01") == "030640615X due 2024-01-15"
    assert give_back(loans, "030640615X", "2024-03-01") == "fine 5.00"
    assert loans == {}


def test_return_on_time():
    loans = {"111": "2024-05-01"}
    assert give_back(loans, "1-1-1", "2024-04-30") == "thank you"


def test_search_line():
    assert search_line(BOOKS, "austen") == "Emma | Persuasion"
    assert search_line(BOOKS, "tolkien") == "no match"
