/**
 * The gateway's two HTML pages (the landing page and the migration guide) share this shell: one
 * inline stylesheet, no script, nothing fetched from elsewhere, and a Content-Security-Policy that
 * allows exactly that stylesheet (by its hash). Every value placed in a page goes through
 * `escapeHtml`: configuration can hold `<`.
 */
import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text or an attribute value, safe inside HTML. */
export function escapeHtml(value: string | number): string {
  return String(value).replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

// Two template pieces only to wrap the longest line: the joined text is what the CSP hashes.
const STYLESHEET =
  `
:root {
  color-scheme: light dark;
  --bg: #ffffff; --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --soft: #f6f8fa;
  --accent: #0969da; --code: #eff1f3; --warn-bg: #fff8c5; --warn-line: #d4a72c;
  --bad-bg: #ffebe9; --bad-line: #cf222e; --ok-bg: #dafbe1; --ok-line: #1a7f37;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --line: #30363d; --soft: #151b23;
    --accent: #4493f8; --code: #262c36; --warn-bg: #2e2a1a; --warn-line: #9e6a03;
    --bad-bg: #2d1618; --bad-line: #f85149; --ok-bg: #12261e; --ok-line: #3fb950;
  }
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body {
  margin: 0; background: var(--bg); color: var(--fg);
  font: 16px/1.6 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
}
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
header.top { border-bottom: 1px solid var(--line); background: var(--soft); }
header.top .bar { max-width: 64rem; margin: 0 auto; padding: .75rem 1.5rem; display: flex; gap: 1.5rem; align-items: baseline; flex-wrap: wrap; }
header.top .name { font-weight: 600; color: var(--fg); }
header.top nav { display: flex; gap: 1.25rem; flex-wrap: wrap; font-size: .95rem; }
main { max-width: 64rem; margin: 0 auto; padding: 1.5rem 1.5rem 4rem; }
h1, h2, h3, h4 { line-height: 1.25; margin: 2rem 0 1rem; position: relative; }
h1 { font-size: 2rem; margin-top: .5rem; }
h2 { font-size: 1.5rem; padding-bottom: .3rem; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.2rem; }
.anchor { position: absolute; left: -1.2rem; padding-right: .3rem; color: var(--muted); opacity: 0; font-weight: 400; }
h1:hover .anchor, h2:hover .anchor, h3:hover .anchor, h4:hover .anchor, .anchor:focus { opacity: 1; text-decoration: none; }
p, ul, ol, table, pre { margin: 0 0 1rem; }
li + li { margin-top: .25rem; }
code { font-family: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", monospace; ` +
  `font-size: .875em; background: var(--code); padding: .15em .35em; border-radius: 4px; overflow-wrap: anywhere; }
pre { background: var(--soft); border: 1px solid var(--line); border-radius: 6px; padding: .9rem 1rem; overflow-x: auto; line-height: 1.45; }
pre code { background: none; padding: 0; font-size: .85rem; overflow-wrap: normal; white-space: pre; }
.table-wrap { overflow-x: auto; margin: 0 0 1rem; }
table { border-collapse: collapse; width: 100%; font-size: .92rem; margin: 0; }
th, td { border: 1px solid var(--line); padding: .45rem .7rem; text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; }
th:first-child, td:first-child { min-width: 13rem; }
tbody tr:nth-child(even) td { background: color-mix(in srgb, var(--soft) 60%, transparent); }
blockquote { margin: 0 0 1rem; padding: 0 1rem; color: var(--muted); border-left: 4px solid var(--line); }
.lead { font-size: 1.1rem; color: var(--muted); max-width: 48rem; }
.toc { background: var(--soft); border: 1px solid var(--line); border-radius: 6px; padding: .75rem 1.25rem; margin: 0 0 2rem; }
.toc strong { display: block; margin-bottom: .25rem; }
.toc ol { margin: 0; padding-left: 1.25rem; columns: 2 18rem; }
.callout { border: 1px solid var(--line); border-left-width: 4px; border-radius: 6px; padding: .75rem 1rem; margin: 0 0 1.5rem; background: var(--soft); }
.callout.warn { background: var(--warn-bg); border-color: var(--warn-line); }
.callout.bad { background: var(--bad-bg); border-color: var(--bad-line); }
.callout.ok { background: var(--ok-bg); border-color: var(--ok-line); }
.callout p { margin: 0; }
.callout p + p { margin-top: .4rem; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(15rem, 1fr)); gap: 1rem; margin: 0 0 1.5rem; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: .9rem 1rem; }
.card h3 { margin: 0 0 .4rem; font-size: .8rem; letter-spacing: .06em; text-transform: uppercase; color: var(--muted); }
.card .value { font-size: 1.35rem; font-weight: 600; overflow-wrap: anywhere; }
.card .value code { font-size: 1rem; font-weight: 400; background: none; padding: 0; }
.card p { margin: .3rem 0 0; color: var(--muted); font-size: .92rem; }
dl.links { display: grid; grid-template-columns: max-content 1fr; gap: .5rem 1.5rem; margin: 0 0 1rem; }
dl.links dt { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .92rem; }
dl.links dd { margin: 0; color: var(--muted); }
footer { max-width: 64rem; margin: 0 auto; padding: 1rem 1.5rem 2rem; color: var(--muted); font-size: .85rem; border-top: 1px solid var(--line); }
`;

/** Allows the one inline stylesheet and the inline icon; no script, no frame, no form, no base. */
const CSP = [
  "default-src 'none'",
  `style-src 'sha256-${createHash('sha256').update(STYLESHEET).digest('base64')}'`,
  'img-src data:',
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** A favicon drawn inline, so the browser asks the gateway for no `/favicon.ico`. */
const ICON =
  'data:image/svg+xml,' +
  encodeURIComponent(
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#0969da"/>' +
      '<path d="M9 11h9l-3-3m8 13h-9l3 3" stroke="#fff" stroke-width="2.5" fill="none" stroke-linecap="round" stroke-linejoin="round"/></svg>',
  );

export interface PageParts {
  /** Plain text (escaped here). */
  title: string;
  /** Trusted HTML: built by this gateway with every value escaped. */
  body: string;
}

/** Header navigation of both pages. */
const NAV = [
  { href: '/', text: 'Gateway' },
  { href: '/docs/migration', text: 'Migration guide' },
  { href: '/v0.2/openapi.json', text: 'v0.2 OpenAPI' },
];

export function htmlPage(p: PageParts): string {
  const nav = NAV.map((l) => `<a href="${l.href}">${escapeHtml(l.text)}</a>`).join('');
  return (
    '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">' +
    '<meta name="viewport" content="width=device-width, initial-scale=1">' +
    `<title>${escapeHtml(p.title)}</title><link rel="icon" href="${ICON}">` +
    `<style>${STYLESHEET}</style></head><body>` +
    `<header class="top"><div class="bar"><a class="name" href="/">Legacy gateway</a><nav>${nav}</nav></div></header>` +
    `<main>${p.body}</main>` +
    '<footer>/v0.2 on top of /v1beta · <a href="/healthz">/healthz</a> · <a href="/readyz">/readyz</a></footer>' +
    '</body></html>\n'
  );
}

/** Sends a page from `htmlPage` with the headers that keep it inert. */
export function sendHtml(res: Response, html: string): void {
  res.setHeader('Content-Security-Policy', CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.type('text/html; charset=utf-8').send(html);
}

/**
 * Whether the client asks for HTML rather than `other`: a browser does (its `Accept` ranks
 * `text/html` first); a missing `Accept`, `*` / `*` and anything unlisted get `other`, so curl,
 * scripts and tools keep the machine-readable form.
 */
export function wantsHtml(req: Request, other: string): boolean {
  if (!req.headers.accept) return false;
  return req.accepts([other, 'text/html']) === 'text/html';
}
