def parse(text):
    # FIXME: handles only ASCII
    return text.split()
