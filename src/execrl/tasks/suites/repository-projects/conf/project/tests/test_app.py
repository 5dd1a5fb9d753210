from conf.app import load_settings

TEXT = "# server\nport = 9000\ndebug = Yes\nhosts = alpha, beta,\n\n"


def test_load_settings():
    assert load_settings(TEXT) == {"port": 9000, "workers": 1, "debug": True, "hosts": ["alpha", "beta"]}


def test_defaults():
    assert load_settings("") == {"port": 8080, "workers": 1, "debug": False, "hosts": []}
