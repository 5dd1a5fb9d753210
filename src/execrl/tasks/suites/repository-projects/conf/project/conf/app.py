from conf.parse import parse
from conf.typed import get_bool, get_int, get_list


def load_settings(text: str) -> dict:
    conf = parse(text)
    return {
        "port": get_int(conf, "port", 8080),
        "workers": get_int(conf, "workers", default=1),
        "debug": get_bool(conf, "debug"),
        "hosts": get_list(conf, "hosts"),
    }
