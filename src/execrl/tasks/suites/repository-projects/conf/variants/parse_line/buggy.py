def parse_line(line: str) -> tuple[str, str] | None:
    key, _, value = line.partition("=")
    return key.strip(), value.strip()
