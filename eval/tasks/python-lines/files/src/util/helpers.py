def greet(name):
    return f"Hello, {name}!"


def shout(name):
    return greet(name).upper()
# end
