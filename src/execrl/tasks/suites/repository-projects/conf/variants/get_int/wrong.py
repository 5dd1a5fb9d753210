def get_int(conf: dict[str, str], key: str, fallback: int = 0) -> int:
    return int(conf[key]) if key in conf else fallback
