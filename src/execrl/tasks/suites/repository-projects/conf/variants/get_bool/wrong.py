def get_bool(conf: dict[str, str], key: str) -> bool:
    return conf.get(key) == "true"
