import sys

def main():
    print("hi")
