from warehouse.orders import fulfil, parse_order, receive, reorder_list


def test_parse_order():
    assert parse_order("3x apple, 2x pear") == [("apple", 3), ("pear", 2)]


def test_fulfil():
    stock = {"apple": 5, "pear": 1}
    assert fulfil(stock, "3x apple,2x pear, 1x fig") == ({"apple": 2, "pear": 1}, ["pear", "fig"])
    assert stock == {"apple": 5, "pear": 1}


def test_reorder_list():
    assert reorder_list({"apple": 5, "pear": 1, "fig": 0}) == ["reorder fig", "reorder pear"]


def test_receive():
    stock = {"apple": 1}
    assert receive(stock, [("apple", 2), ("pear", 12)]) == ({"apple": 3, "pear": 12}, 14)
    assert stock == {"apple": 1}
