"""`loadtest`'s report, plots and the `bench` extra, from fixed figures."""
