from conf.parse import parse, parse_line


def test_parse_line():
    assert parse_line("a=1") == ("a", "1")
    assert parse_line("# comment") is None


def test_parse():
    assert parse("a=1\nb=2\na=3") == {"a": "3", "b": "2"}
