"""Data sets below the studies: TPC-H files and loads, the seed 003 tables."""
