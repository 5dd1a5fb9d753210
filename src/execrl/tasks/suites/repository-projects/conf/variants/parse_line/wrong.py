def parse_line(line: str) -> tuple[str, str] | None:
    if not line or line.startswith("#"):
        return None
    key, _, value = line.partition("=")
    return key, value
