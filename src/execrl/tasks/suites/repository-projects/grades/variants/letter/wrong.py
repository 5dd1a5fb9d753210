def letter(avg: float, scale: tuple) -> str:
    for threshold, grade in scale:
        if avg >= threshold:
            return grade
    return "F"
