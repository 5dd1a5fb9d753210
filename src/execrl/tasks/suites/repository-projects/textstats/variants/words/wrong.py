def words(text: str) -> list[str]:
    return text.split()
