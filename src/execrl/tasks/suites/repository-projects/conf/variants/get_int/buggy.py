def get_int(conf: dict[str, str], key: str, default: int = 0) -> int:
    return int(conf.get(key, 0))
