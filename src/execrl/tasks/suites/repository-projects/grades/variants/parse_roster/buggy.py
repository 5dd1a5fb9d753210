def parse_roster(text: str) -> dict[str, list[int]]:
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        out[name] = [int(x) for x in rest.split(",")]
    return out
