// Reads a Parquet file with DuckDB and prints what DuckDB sees as one JSON object:
// {"duckdb": version, "columns": [{"name", "type"}], "rows": [[value, ...], ...]}, the types
// named as DESCRIBE names them.
// Values are written losslessly: BIGINT as a decimal string (a JS number would round past
// 2^53), timestamps as µs since the epoch in a decimal string (independent of the session's
// time zone), JSON and VARCHAR as their text, DOUBLE and BOOLEAN as JSON numbers and booleans,
// NULL as null.
//
// Usage: node read.mjs NODE_MODULES FILE.parquet
// NODE_MODULES is the node_modules directory that holds @duckdb/node-api: an ES module
// import would only look beside this script, so the package is required from there.
import { createRequire } from 'node:module';
import path from 'node:path';

const [nodeModules, file] = process.argv.slice(2);
if (!nodeModules || !file) {
  console.error('usage: node read.mjs NODE_MODULES FILE.parquet');
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(nodeModules), '..', 'lookout-read.cjs'));
const duckdb = require('@duckdb/node-api');

const instance = await duckdb.DuckDBInstance.create(':memory:');
const connection = await instance.connect();
const reader = await connection.runAndReadAll('SELECT * FROM read_parquet($1)', [file]);
const types = reader.columnTypes();

function plain(v, type) {
  if (v === null || v === undefined) return null;
  switch (type.typeId) {
    case duckdb.DuckDBTypeId.TIMESTAMP:
    case duckdb.DuckDBTypeId.TIMESTAMP_TZ:
      return v.micros.toString();
  }
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
  throw new Error(`no plain form for a ${type} value: ${v}`);
}

process.stdout.write(JSON.stringify({
  duckdb: duckdb.version(),
  // A JSON column is a VARCHAR with the alias JSON: the alias is the name DESCRIBE shows.
  columns: reader.columnNames().map((name, i) => ({ name, type: types[i].alias ?? types[i].toString() })),
  rows: reader.getRows().map((row) => row.map((v, i) => plain(v, types[i]))),
}) + '\n');
connection.closeSync();
instance.closeSync();
