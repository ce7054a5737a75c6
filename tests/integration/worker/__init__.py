"""Workers run in-process against the testbed and a real Redis."""
