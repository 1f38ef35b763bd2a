"""Published GPU figures (vendor datasheets): the tool layer shows them (`gpu://specs`), the judge bounds
a kernel's time by them (`judge/timing.py: physical_floor_ms`)."""

# Peak DRAM bandwidth by GPU name, for the physical floor on a kernel's time.
PEAK_BANDWIDTH_BYTES_PER_S = {"H200": 4.8e12, "H100": 3.35e12, "H20": 4.0e12, "A100": 2.0e12, "B200": 8.0e12}
