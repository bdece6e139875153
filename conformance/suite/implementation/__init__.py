"""IMP-* and SCALE-1: the implementation under test, through its profile."""
