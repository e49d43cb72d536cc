/**
 * Shared helpers for browser tests: Debian's Chromium driven by playwright-core (never a
 * downloaded browser), page scripts bundled with esbuild at test time, pages served on loopback.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { build } from 'esbuild';
import type express from 'express';
import { chromium } from 'playwright-core';
import type { BrowserContext, Page } from 'playwright-core';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Flags for a quiet, sandbox-free, loopback-only headless Chromium with a fake camera. */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--use-fake-device-for-media-stream',
  '--use-fake-ui-for-media-stream',
  '--allow-loopback-in-peer-connection',
];

export interface TestBrowser {
  context: BrowserContext;
  /** A new page whose console errors are kept (and printed when `verbose`). */
  newPage(): Promise<Page & { consoleErrors: string[] }>;
  close(): Promise<void>;
}

/** Launches Chromium with a fresh temporary profile; `close` removes the profile. */
export async function launchBrowser(extraArgs: string[] = [], verbose = !!process.env.BROWSER_TEST_LOG): Promise<TestBrowser> {
  const userDataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'test-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: [...CHROMIUM_ARGS, ...extraArgs],
    });
  } catch (err) {
    await fs.rm(userDataDir, { recursive: true, force: true });
    throw err;
  }
  return {
    context,
    async newPage() {
      const page = Object.assign(await context.newPage(), { consoleErrors: [] as string[] });
      page.on('console', (msg) => {
        if (msg.type() === 'error') page.consoleErrors.push(msg.text());
        if (verbose) console.log(`[page ${msg.type()}] ${msg.text().slice(0, 500)}`);
      });
      page.on('pageerror', (err) => page.consoleErrors.push(err.message));
      return page;
    },
    async close() {
      await context.close().catch(() => undefined);
      await fs.rm(userDataDir, { recursive: true, force: true });
    },
  };
}

/** Bundles a page entry (TS or JS) into one IIFE script, in memory. */
export async function bundleScript(entry: string): Promise<string> {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: 'chrome110',
    write: false,
    logLevel: 'silent',
  });
  return result.outputFiles[0].text;
}

/** Serves `route` as a blank HTML page that loads `script` (served at `<route>.js`). */
export function servePage(app: express.Express, route: string, script: string): void {
  app.get(`${route}.js`, (_req, res) => {
    res.type('text/javascript').send(script);
  });
  app.get(route, (_req, res) => {
    res
      .type('text/html')
      .send(
        `<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"><script src="${route}.js"></script></head><body></body></html>`,
      );
  });
}
