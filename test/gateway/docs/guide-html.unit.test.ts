/** The guide as HTML: headings with ids, a table of contents, code blocks, and no way in for markup of the markdown's own. */
import fs from 'node:fs';
import path from 'node:path';
import { guideHtml, slugify } from '../../../src/gateway/docs/guide-html';
import { escapeHtml } from '../../../src/gateway/docs/page';
import { ROOT } from '../../helpers/util';

const count = (text: string, re: RegExp) => (text.match(re) ?? []).length;

test('the real guide: a titled page, every heading with an id, a contents list of the sections, code in pre/code', () => {
  const html = guideHtml(fs.readFileSync(path.join(ROOT, 'docs', 'migration.md'), 'utf8'));
  expect(html).toMatch(/^<!doctype html>/);
  expect(html).toContain('<title>Moving from /v0.2 to /v1beta</title>');
  expect(html).toContain('<h1 id="moving-from-v02-to-v1beta">');
  expect(count(html, /<h2 id="[a-z0-9-]+">/g)).toBeGreaterThan(5);
  expect(count(html, /<pre><code/g)).toBeGreaterThan(5);
  expect(count(html, /<table>/g)).toBe(2);
  // The contents list links every h2, and every in-page link has its target.
  const ids = new Set([...html.matchAll(/ id="([^"]+)"/g)].map((m) => m[1]));
  const anchors = [...html.matchAll(/href="#([^"]+)"/g)].map((m) => m[1]!);
  expect(anchors.length).toBeGreaterThan(10);
  for (const a of anchors) expect({ a, found: ids.has(a) }).toEqual({ a, found: true });
  expect(html).toContain('<a href="#checklist">Checklist</a>');
  // No script anywhere; the stylesheet is inline; nothing is loaded from elsewhere.
  expect(html).not.toMatch(/<script/i);
  expect(html).not.toMatch(/<link rel="stylesheet"|(src|href)="(https?:)?\/\//);
});

test('GitHub-style slugs; repeated headings are numbered', () => {
  expect(slugify('Moving from `/v0.2` to `/v1beta`')).toBe('moving-from-v02-to-v1beta');
  expect(slugify('Decided: the 400 tok/s frame body keeps its 422')).toBe('decided-the-400-toks-frame-body-keeps-its-422');
  const html = guideHtml('# T\n\n## Same\n\n## Same\n');
  expect(html).toContain('<h2 id="same">');
  expect(html).toContain('<h2 id="same-1">');
});

test('raw HTML in the markdown is shown as text, never run; javascript: links are not links', () => {
  const html = guideHtml('# T\n\n<script>alert(1)</script>\n\nInline <img src=x onerror=alert(1)> and [click](javascript:alert(1)).\n');
  expect(html).not.toMatch(/<script>alert|<img src=x/);
  expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
  expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;');
  expect(html).not.toContain('href="javascript:');
});

test('escapeHtml covers text and attribute values', () => {
  expect(escapeHtml(`<a href="x" title='y'>&</a>`)).toBe('&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
  expect(escapeHtml(42)).toBe('42');
});
