def get_list(conf: dict[str, str], key: str) -> list[str]:
    return conf.get(key, "").split(",")
