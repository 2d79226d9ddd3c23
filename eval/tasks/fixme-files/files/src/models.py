class User:
    name: str
    # TODO: add email
