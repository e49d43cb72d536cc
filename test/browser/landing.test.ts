/**
 * The gateway's two pages in headless Chromium, as a newcomer opens them: `/` and `/docs/migration`
 * from a real gateway on the emulator, with the browser's own `Accept`. No page or console error
 * (a style the CSP refused would be one), the guide's headings and code blocks rendered, every
 * link answering (same-origin ones fetched, in-page ones found as ids), and a full-page screenshot
 * of each kept under the temp directory (its path printed).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { startStack } from '../helpers/stack';
import type { Stack } from '../helpers/stack';
import { launchBrowser } from './helpers';
import type { TestBrowser } from './helpers';

let stack: Stack;
let browser: TestBrowser;
let shots: string;

beforeAll(async () => {
  [stack, browser, shots] = await Promise.all([startStack(), launchBrowser(), fs.mkdtemp(path.join(os.tmpdir(), 'landing-screens-'))]);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

/** Every link of the page: in-page ones must name an element's id, the rest must be this origin's and answer below 400. */
async function checkLinks(page: Page, origin: string, accept: string): Promise<number> {
  const links = await page.$$eval('a[href]', (as) =>
    as.map((a) => ({ raw: a.getAttribute('href') ?? '', resolved: (a as HTMLAnchorElement).href })),
  );
  for (const { raw, resolved } of links) {
    if (raw.startsWith('#')) {
      const id = decodeURIComponent(raw.slice(1));
      const found = await page.evaluate((x) => document.getElementById(x) !== null, id);
      expect({ raw, found }).toEqual({ raw, found: true });
      continue;
    }
    expect({ raw, origin: new URL(resolved).origin }).toEqual({ raw, origin });
    const r = await fetch(resolved, { headers: { accept } });
    expect({ raw, ok: r.status < 400 }).toEqual({ raw, ok: true });
    await r.body?.cancel();
  }
  return links.length;
}

async function open(route: string): Promise<Page & { consoleErrors: string[] }> {
  const page = await browser.newPage();
  await page.setViewportSize({ width: 1280, height: 900 });
  const res = await page.goto(`${stack.url}${route}`, { waitUntil: 'load' });
  expect(res?.status()).toBe(200);
  expect(res?.headers()['content-type']).toBe('text/html; charset=utf-8');
  return page;
}

async function screenshot(page: Page, name: string): Promise<void> {
  const file = path.join(shots, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`screenshot of ${name}: ${file}`);
}

test('the landing page renders with no error, shows the gateway’s state, and every link answers', async () => {
  const page = await open('/');
  try {
    await expect(page.title()).resolves.toBe('Legacy gateway: /v0.2 on top of /v1beta');
    await expect(page.textContent('h1')).resolves.toBe('/v0.2 → /v1beta gateway');
    const text = (await page.textContent('main')) ?? '';
    expect(text).toContain('the embedded emulator');
    expect(text).toContain('In memory');
    expect(text).toContain('Solo');
    expect(text).toMatch(/\/v0\.2 is deprecated\.|passed its sunset/);
    expect(await page.$$eval('.card', (c) => c.length)).toBe(5);
    // The stylesheet applied (the CSP allows it by hash): the header bar has its background.
    const bar = await page.$eval('header.top', (h) => getComputedStyle(h).borderBottomStyle);
    expect(bar).toBe('solid');
    const links = await checkLinks(page, stack.url, 'text/html,*/*;q=0.8');
    expect(links).toBeGreaterThanOrEqual(8);
    await screenshot(page, 'landing');
    expect(page.consoleErrors).toEqual([]);
  } finally {
    await page.close();
  }
});

test('the migration guide renders as a page: headings with ids, code blocks, tables, a contents list whose links all land', async () => {
  const page = await open('/docs/migration');
  try {
    await expect(page.title()).resolves.toBe('Moving from /v0.2 to /v1beta');
    await expect(page.textContent('h1')).resolves.toMatch(/Moving from \/v0\.2 to \/v1beta/);
    expect(await page.$$eval('h2', (h) => h.length)).toBeGreaterThan(5);
    expect(await page.$$eval('pre code', (c) => c.length)).toBeGreaterThan(5);
    expect(await page.$$eval('table', (t) => t.length)).toBe(2);
    expect(await page.$$eval('h1[id], h2[id], h3[id]', (h) => h.length)).toBe(await page.$$eval('h1, h2, h3', (h) => h.length));
    expect(await page.$$eval('.toc a', (a) => a.length)).toBe(await page.$$eval('h2', (h) => h.length));
    // A code block keeps its lines: the TypeScript example is one block of many lines.
    const longest = await page.$$eval('pre code', (cs) => Math.max(...cs.map((c) => (c.textContent ?? '').split('\n').length)));
    expect(longest).toBeGreaterThan(30);
    const links = await checkLinks(page, stack.url, 'text/html,*/*;q=0.8');
    expect(links).toBeGreaterThan(10);
    await screenshot(page, 'migration-guide');
    expect(page.consoleErrors).toEqual([]);
  } finally {
    await page.close();
  }
});
