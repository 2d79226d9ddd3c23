CACHE = {}

def get(key):
    return CACHE.get(key)  # FIXME never expires
