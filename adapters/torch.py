"""placeholder: adapter arrives with its issue."""
