from util.helpers import greet, shout


def test_greet():
    assert greet("Ana") == "Hello, Ana!"


def test_shout():
    assert shout("Ana") == "HELLO, ANA!"
