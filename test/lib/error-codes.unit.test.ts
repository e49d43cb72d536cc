/**
 * One registry of error codes (src/lib/error-codes.ts) checked against the code and against
 * docs/errors.md, both ways, as fastify's errors test checks its errors.js against its docs.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ERROR_CODES, isRegisteredCode } from '../../src/lib/error-codes';

const ROOT = join(__dirname, '..', '..');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return p.endsWith('.ts') && !p.endsWith('.d.ts') ? [p] : [];
  });
}

/** A template part (`${res.status}`) becomes a placeholder, as the registry writes it. */
const normalise = (code: string) => code.replace(/\$\{[^}]*\}/g, '<x>');

/** Codes the source emits: error helpers' (and ServiceError subclasses' `super`) code argument, hand-written `{error: '<code>'}` bodies, `{ status, code }` table entries, functions named `*Code`. */
function codesInSource(): Map<string, string> {
  const found = new Map<string, string>();
  const add = (code: string, file: string) => found.set(normalise(code), file.slice(ROOT.length + 1));
  for (const file of sourceFiles(join(ROOT, 'src'))) {
    const text = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\/|^\s*\/\/.*$/gm, '');
    for (const m of text.matchAll(
      /(?:legacyError|streamError|detailError|new ServiceError|super)\(\s*[^,()]+,\s*(['"`])([a-z][\w${}.]*)\1/g,
    ))
      add(m[2]!, file);
    for (const m of text.matchAll(/\berror:\s*'([a-z][a-z0-9_]*)'/g)) add(m[1]!, file);
    // Mapping tables ({ status, code: '<code>' }), e.g. the upstream→legacy error mapping.
    for (const m of text.matchAll(/\bstatus:\s*\d{3},\s*code:\s*'([a-z][a-z0-9_]*)'/g)) add(m[1]!, file);
    for (const m of text.matchAll(/function \w*Code\([^)]*\)[^{]*\{([\s\S]*?)\n\}/g)) {
      for (const r of m[1]!.matchAll(/return (['"`])([a-z][\w${}.]*)\1/g)) add(r[2]!, file);
    }
  }
  return found;
}

/** Codes the page lists: backticked codes in the code column of its tables. */
function codesOnPage(): Set<string> {
  const page = readFileSync(join(ROOT, 'docs', 'errors.md'), 'utf8');
  const out = new Set<string>();
  for (const line of page.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    if (!line.startsWith('|') || cells.length < 4) continue;
    for (const m of cells[2]!.matchAll(/`([a-z][a-z0-9_]*(?:<[a-z]+>)?)`/g)) out.add(m[1]!);
  }
  return out;
}

const registry = Object.keys(ERROR_CODES);

describe('error code registry', () => {
  test('every code the source emits is registered', () => {
    const source = codesInSource();
    expect(source.size).toBeGreaterThan(30); // the scan finds the codes at all
    const missing = [...source]
      .filter(([code]) => !isRegisteredCode(code.replace(/<x>/g, 'x0')))
      .map(([code, file]) => `${code} (${file})`);
    expect(missing).toEqual([]);
  });

  test('every registered code is emitted somewhere in the source', () => {
    const source = [...codesInSource().keys()].map((c) => c.replace(/<x>/g, '<status>'));
    expect(registry.filter((code) => !source.includes(code))).toEqual([]);
  });

  test('every registered code is on docs/errors.md', () => {
    const page = codesOnPage();
    expect(registry.filter((code) => !page.has(code))).toEqual([]);
  });

  test('every code on docs/errors.md is registered', () => {
    expect([...codesOnPage()].filter((code) => !isRegisteredCode(code) && !(code in ERROR_CODES))).toEqual([]);
  });

  test('the registry is sorted, one code per line (parallel additions merge cleanly)', () => {
    expect(registry).toEqual([...registry].sort());
  });
});
