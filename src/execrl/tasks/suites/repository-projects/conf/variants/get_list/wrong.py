def get_list(conf: dict[str, str], key: str) -> list[str]:
    value = conf.get(key, "")
    return value.split(",") if value else []
