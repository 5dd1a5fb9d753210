def get_int(conf: dict[str, str], key: str) -> int:
    """The value of `key` as an int, or 0 when the key is missing."""
    return int(conf[key]) if key in conf else 0
