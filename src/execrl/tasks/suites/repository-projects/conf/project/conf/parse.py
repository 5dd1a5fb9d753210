def parse_line(line: str) -> tuple[str, str] | None:
    """'key = value' -> ('key', 'value'), both stripped; blank lines and '#' comments -> None."""
    line = line.strip()
    if not line or line.startswith("#") or "=" not in line:
        return None
    key, _, value = line.partition("=")
    return key.strip(), value.strip()


def parse(text: str) -> dict[str, str]:
    """All key/value pairs of a config text; later keys win."""
    out = {}
    for line in text.splitlines():
        pair = parse_line(line)
        if pair is not None:
            out[pair[0]] = pair[1]
    return out
