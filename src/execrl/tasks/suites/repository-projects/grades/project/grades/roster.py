from grades.scores import average, curve, letter


def parse_roster(text: str) -> dict[str, list[int]]:
    """Lines like 'Ann: 90, 85' -> {'Ann': [90, 85]}; names and numbers are stripped."""
    out = {}
    for line in text.splitlines():
        if ":" in line:
            name, _, rest = line.partition(":")
            out[name.strip()] = [int(x) for x in rest.split(",") if x.strip()]
    return out


def report(text: str, bonus: int = 0) -> list[str]:
    """'Name: average letter' per student; students without scores get 'n/a'."""
    lines = []
    for name, scores in parse_roster(text).items():
        try:
            avg = average(curve(scores, bonus))
        except ValueError:
            lines.append(f"{name}: n/a")
            continue
        lines.append(f"{name}: {avg:.1f} {letter(avg)}")
    return lines


def raw_and_curved(scores: list[int], bonus: int) -> tuple[float, float]:
    curved = curve(scores, bonus)
    return average(scores), average(curved)
