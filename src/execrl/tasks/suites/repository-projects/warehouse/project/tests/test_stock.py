from warehouse.stock import low_stock, restock, take


def test_restock():
    assert restock({"apple": 2}, "apple", 3) == {"apple": 5}
    assert restock({}, "pear", 1) == {"pear": 1}


def test_take():
    assert take({"apple": 5}, "apple", 2) == {"apple": 3}


def test_low_stock():
    assert low_stock({"a": 1, "b": 9, "c": 4}, 5) == ["a", "c"]
    assert low_stock({"a": 1, "b": 9}, 10) == ["a", "b"]
