/**
 * `node dist-bench/bench/heap-diff.js <before.heapsnapshot> <after.heapsnapshot> [streams] [top]`:
 * what grew between two heap snapshots of one process (`BENCH_SCALE_HEAPSNAPSHOTS`), as self size
 * and count by node type and constructor (closures by function name, strings and code by type),
 * largest growth first, per stream when `streams` is given. Self sizes only: a native buffer or a
 * zlib context counts here by its JS wrapper, its backing store shows in the external gauge.
 */
import fs from 'node:fs';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: (string[] | string)[] } };
  nodes: number[];
  strings: string[];
}

/** Self size and count per `type name` key. */
function tally(file: string): Map<string, { size: number; count: number }> {
  const snap = JSON.parse(fs.readFileSync(file, 'utf8')) as Snapshot;
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0] as string[];
  const width = fields.length;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [number, number, number];
  const out = new Map<string, { size: number; count: number }>();
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt]!]!;
    // Strings and code are many distinct names: grouped by type alone.
    const byType = type === 'string' || type === 'concatenated string' || type === 'sliced string' || type === 'code' || type === 'number';
    const name = byType ? '' : snap.strings[snap.nodes[i + nameAt]!]!.slice(0, 80);
    const key = `${type} ${name}`;
    const t = out.get(key) ?? { size: 0, count: 0 };
    t.size += snap.nodes[i + sizeAt]!;
    t.count += 1;
    out.set(key, t);
  }
  return out;
}

function main(): void {
  const [beforeFile, afterFile, streamsArg, topArg] = process.argv.slice(2);
  if (!beforeFile || !afterFile) throw new Error('usage: heap-diff <before.heapsnapshot> <after.heapsnapshot> [streams] [top]');
  const per = Number(streamsArg ?? 1) || 1;
  const top = Number(topArg ?? 40) || 40;
  const before = tally(beforeFile);
  const after = tally(afterFile);
  const rows = [...new Set([...before.keys(), ...after.keys()])].map((key) => {
    const a = after.get(key) ?? { size: 0, count: 0 };
    const b = before.get(key) ?? { size: 0, count: 0 };
    return { key, size: a.size - b.size, count: a.count - b.count };
  });
  rows.sort((x, y) => y.size - x.size);
  const total = rows.reduce((k, r) => k + r.size, 0);
  console.log(`self size grown: ${(total / 1024).toFixed(0)} KiB in all, ${(total / per).toFixed(0)} B per ${per > 1 ? 'stream' : 'unit'}`);
  console.log('bytes/stream  count/stream  type constructor');
  for (const r of rows.slice(0, top)) {
    console.log(`${(r.size / per).toFixed(0).padStart(12)}  ${(r.count / per).toFixed(2).padStart(12)}  ${r.key}`);
  }
}

main();
