def letter(avg: float) -> str:
    """The letter of the first (threshold, letter) pair with avg >= threshold, else 'F'."""
    for threshold, grade in SCALE:
        if avg >= threshold:
            return grade
    return "F"
