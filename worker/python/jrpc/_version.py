"""The package's version: the same as the C programs' (the project VERSION
in the top CMakeLists.txt); tests/py/test_version.py checks they are equal."""

__version__ = "0.1.0"
