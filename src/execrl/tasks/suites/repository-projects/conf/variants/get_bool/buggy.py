def get_bool(conf: dict[str, str], key: str) -> bool:
    return bool(conf.get(key))
