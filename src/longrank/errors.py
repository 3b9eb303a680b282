"""The error every stage raises for bad input, and the command line prints as one line (``longrank <stage>:
error: ...``). Its own module, so that raising it imports no file format."""


class InputError(Exception):
    """Bad user input: the message names the offending key, file or id and what was expected."""
