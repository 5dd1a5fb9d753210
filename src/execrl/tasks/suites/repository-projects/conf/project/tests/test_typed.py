from conf.typed import get_bool, get_int, get_list


def test_get_int():
    assert get_int({"n": "4"}, "n", 7) == 4
    assert get_int({}, "n", 7) == 7


def test_get_bool():
    assert get_bool({"x": "true"}, "x") is True
    assert get_bool({"x": "false"}, "x") is False
    assert get_bool({}, "x") is False


def test_get_list():
    assert get_list({"h": "a,b"}, "h") == ["a", "b"]
    assert get_list({}, "h") == []
