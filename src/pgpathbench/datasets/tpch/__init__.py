"""TPC-H, the data set of file-fdw-tpch (seed 002), below the studies so that bench/ and tests use
the same code: schema.py (tables, columns, the files' trailing '|'), queries.py (the 22 queries,
their rewrites and the specification's texts), files.py (generation with tpchgen-cli, cached per
scale; part files and their order-key bounds), load.py (COPY of file slices on a pool of
connections), answers.py (digests, row comparison across engines, DuckDB's answers) and plans.py
(a plan's join tree in one line, its parallel workers)."""
