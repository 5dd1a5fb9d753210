TRUE_WORDS = ("1", "true", "yes", "on")


def get_int(conf: dict[str, str], key: str, default: int = 0) -> int:
    """The value of `key` as an int, or `default` when the key is missing."""
    return int(conf[key]) if key in conf else default


def get_bool(conf: dict[str, str], key: str) -> bool:
    """True for '1', 'true', 'yes' or 'on' in any case; False otherwise or when missing."""
    return conf.get(key, "").lower() in TRUE_WORDS


def get_list(conf: dict[str, str], key: str) -> list[str]:
    """Comma-separated items, stripped, without empty ones; [] when missing."""
    return [item.strip() for item in conf.get(key, "").split(",") if item.strip()]
