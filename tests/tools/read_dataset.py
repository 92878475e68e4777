#!/usr/bin/env python3
"""Independent reader for tests/batch.rs: reads the hive-partitioned Parquet dataset of
`lnetcap batch --out DIR` in place with DuckDB and with pyarrow.dataset. Prints one JSON
object: {"duckdb": {table: {capture: rows}}, "pyarrow": {...same...},
"peers_duckdb": [{capture, file, client_nid, server_nid, rpcs, throughput_bytes_per_s,
binding_limit}], "peers_pyarrow": [...same...], "inputs": [{file, status}]}.
Exits 3 when pyarrow or duckdb is missing (the test skips unless
LNETCAP_REQUIRE_ORACLES=1)."""
import json
import math
import sys

try:
    import duckdb
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
except ImportError as e:
    print(f"missing: {e}", file=sys.stderr)
    sys.exit(3)

d = sys.argv[1]
TABLES = ["rpcs", "connections", "peers", "timeseries"]
PEER_COLS = ["capture", "file", "client_nid", "server_nid", "rpcs", "throughput_bytes_per_s", "binding_limit"]


def clean(v):
    return None if isinstance(v, float) and math.isnan(v) else v


out = {"duckdb": {}, "pyarrow": {}}
con = duckdb.connect()
for t in TABLES:
    rows = con.execute(
        f"SELECT capture, count(*) FROM read_parquet('{d}/{t}/**/*.parquet', hive_partitioning = true) "
        "GROUP BY capture ORDER BY capture"
    ).fetchall()
    out["duckdb"][t] = {c: n for c, n in rows}
    tb = ds.dataset(f"{d}/{t}", format="parquet", partitioning="hive").to_table()
    counts = {}
    for c in tb.column("capture").to_pylist():
        counts[c] = counts.get(c, 0) + 1
    out["pyarrow"][t] = dict(sorted(counts.items()))

q = f"SELECT {', '.join(PEER_COLS)} FROM '{d}/peers/**/*.parquet' ORDER BY capture, client_nid, server_nid"
out["peers_duckdb"] = [dict(zip(PEER_COLS, map(clean, r))) for r in con.execute(q).fetchall()]
tb = ds.dataset(f"{d}/peers", format="parquet", partitioning="hive").to_table(columns=PEER_COLS)
rows = [{k: clean(v) for k, v in r.items()} for r in tb.to_pylist()]
out["peers_pyarrow"] = sorted(rows, key=lambda r: (r["capture"], r["client_nid"], r["server_nid"]))
out["inputs"] = [{"file": r["file"], "status": r["status"]} for r in pq.read_table(f"{d}/inputs/inputs.parquet").to_pylist()]
print(json.dumps(out))
