"""The testbed itself, and its command line."""
