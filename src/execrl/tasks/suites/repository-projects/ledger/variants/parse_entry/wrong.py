def parse_entry(line: str) -> tuple[str, str, int]:
    date, category, amount = line.split()
    return date, category, parse_amount(amount)
