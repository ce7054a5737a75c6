"""The benchmarks run end to end on a small preset (marked `bench`)."""
