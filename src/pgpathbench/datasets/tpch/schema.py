"""The TPC-H schema: tables and their columns in file order, with PostgreSQL types (clause 1.4.1
of the specification), and how the .tbl files map onto tables.

Every tpchgen line ends with '|': a file_fdw table over a .tbl file has one extra, always empty,
trailing column (`DUMMY_COLUMN`), and regular tables are loaded without it.
"""

from __future__ import annotations

# Tables and their columns in file order, with PostgreSQL types (clause 1.4.1 of the spec).
TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "region": (("r_regionkey", "integer"), ("r_name", "char(25)"), ("r_comment", "varchar(152)")),
    "nation": (("n_nationkey", "integer"), ("n_name", "char(25)"), ("n_regionkey", "integer"),
               ("n_comment", "varchar(152)")),
    "part": (("p_partkey", "integer"), ("p_name", "varchar(55)"), ("p_mfgr", "char(25)"), ("p_brand", "char(10)"),
             ("p_type", "varchar(25)"), ("p_size", "integer"), ("p_container", "char(10)"),
             ("p_retailprice", "numeric(15,2)"), ("p_comment", "varchar(23)")),
    "supplier": (("s_suppkey", "integer"), ("s_name", "char(25)"), ("s_address", "varchar(40)"),
                 ("s_nationkey", "integer"), ("s_phone", "char(15)"), ("s_acctbal", "numeric(15,2)"),
                 ("s_comment", "varchar(101)")),
    "partsupp": (("ps_partkey", "integer"), ("ps_suppkey", "integer"), ("ps_availqty", "integer"),
                 ("ps_supplycost", "numeric(15,2)"), ("ps_comment", "varchar(199)")),
    "customer": (("c_custkey", "integer"), ("c_name", "varchar(25)"), ("c_address", "varchar(40)"),
                 ("c_nationkey", "integer"), ("c_phone", "char(15)"), ("c_acctbal", "numeric(15,2)"),
                 ("c_mktsegment", "char(10)"), ("c_comment", "varchar(117)")),
    "orders": (("o_orderkey", "integer"), ("o_custkey", "integer"), ("o_orderstatus", "char(1)"),
               ("o_totalprice", "numeric(15,2)"), ("o_orderdate", "date"), ("o_orderpriority", "char(15)"),
               ("o_clerk", "char(15)"), ("o_shippriority", "integer"), ("o_comment", "varchar(79)")),
    "lineitem": (("l_orderkey", "integer"), ("l_partkey", "integer"), ("l_suppkey", "integer"),
                 ("l_linenumber", "integer"), ("l_quantity", "numeric(15,2)"), ("l_extendedprice", "numeric(15,2)"),
                 ("l_discount", "numeric(15,2)"), ("l_tax", "numeric(15,2)"), ("l_returnflag", "char(1)"),
                 ("l_linestatus", "char(1)"), ("l_shipdate", "date"), ("l_commitdate", "date"),
                 ("l_receiptdate", "date"), ("l_shipinstruct", "char(25)"), ("l_shipmode", "char(10)"),
                 ("l_comment", "varchar(44)")),
}
# lineitem and orders are the large tables: partitioned (by order key) in the partitioned and
# scale-out layouts, in the parts tpchgen-cli writes (each part holds whole orders).
PARTITIONED = ("lineitem", "orders")
PARTITION_KEY = {"lineitem": "l_orderkey", "orders": "o_orderkey"}
DUMMY_COLUMN = "tbl_trailing_empty"   # the empty field after each line's final '|'
ORDER_KEY_LIMIT_SCALE = 300           # integer order keys (max 6,000,000 x SF x ... < 2^31) up to this SF


def column_list(table: str, with_dummy: bool = False) -> str:
    cols = [f"{name} {typ}" for name, typ in TABLES[table]]
    if with_dummy:
        cols.append(f"{DUMMY_COLUMN} text")
    return ", ".join(cols)


def duckdb_type(pg_type: str) -> str:
    """DuckDB has no blank-padded char(n): strings are compared right-trimmed."""
    if pg_type.startswith(("char", "varchar")):
        return "VARCHAR"
    if pg_type.startswith("numeric"):
        return pg_type.replace("numeric", "DECIMAL")
    return pg_type.upper()
