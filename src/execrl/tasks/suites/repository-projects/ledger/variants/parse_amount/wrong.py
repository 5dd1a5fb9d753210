def parse_amount(text: str) -> int:
    return int(float(text) * 100)
