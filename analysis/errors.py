class HeapcostError(Exception):
    """A problem the user can fix: printed as one line, exit status 2, no traceback."""
