"""Tables: the row decoder, the scanner, datasets over many files, the statistics sidecar,
and the DuckDB and Polars front ends.
"""
