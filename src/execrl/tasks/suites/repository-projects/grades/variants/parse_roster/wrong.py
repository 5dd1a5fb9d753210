def parse_roster(text: str) -> dict[str, list[int]]:
    out = {}
    for line in text.splitlines():
        if ":" in line:
            name, _, rest = line.partition(":")
            out[name.strip()] = [int(x) for x in rest.split(",") if x.strip()] or None
    return out
