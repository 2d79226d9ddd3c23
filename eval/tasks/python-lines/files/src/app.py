import sys
from util.helpers import greet


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "world"
    print(greet(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
