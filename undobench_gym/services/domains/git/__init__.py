"""Git hosting domain: real repositories driven by the git command line."""
