#!/usr/bin/env python3
"""Independent reader for tests/tables.rs: reads the Parquet tables of `lnetcap analyze
--out` with Apache Arrow (pyarrow) and, when installed, counts their rows with DuckDB; reads
the CSV tables with Python's csv module. Prints one JSON object:
{table: {"schema": [[name, arrow type]], "rows": [...], "csv_header": [...],
"csv_rows": [[...]], "duckdb_rows": n | null}}.
Exits 3 when pyarrow is missing (the test skips unless LNETCAP_REQUIRE_ORACLES=1)."""
import csv
import json
import math
import sys

try:
    import pyarrow.parquet as pq
except ImportError:
    print("pyarrow is not installed", file=sys.stderr)
    sys.exit(3)
try:
    import duckdb
except ImportError:
    duckdb = None

pq_dir, csv_dir = sys.argv[1], sys.argv[2]
out = {}
for t in ["rpcs", "messages", "connections", "peers", "timeseries"]:
    path = f"{pq_dir}/{t}.parquet"
    tb = pq.read_table(path)
    rows = tb.to_pylist()
    for r in rows:
        for k, v in r.items():
            if isinstance(v, float) and not math.isfinite(v):
                raise SystemExit(f"{t}.{k}: non-finite float {v} (must be null)")
    with open(f"{csv_dir}/{t}.csv", newline="") as f:
        lines = list(csv.reader(f))
    count = None
    if duckdb is not None:
        count = duckdb.sql(f"SELECT count(*) FROM read_parquet('{path}')").fetchall()[0][0]
    out[t] = {
        "schema": [[f.name, str(f.type)] for f in tb.schema],
        "rows": rows,
        "csv_header": lines[0] if lines else [],
        "csv_rows": lines[1:],
        "duckdb_rows": count,
    }
json.dump(out, sys.stdout)
