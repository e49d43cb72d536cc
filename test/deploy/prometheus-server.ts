/**
 * A real Prometheus (Debian's `prometheus` package, installed by .ci/run) for a test: its own temp
 * dir and config, loopback on a free port, scraping and evaluating every second, read through its
 * HTTP API. SIGKILLed when this process exits if `stop()` was not reached.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { freePort } from '../helpers/util';
import { sleep } from '../helpers/time';

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

export interface PrometheusAlert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
  value: string;
}

export interface PrometheusRule {
  name: string;
  type: 'alerting' | 'recording';
  health: 'ok' | 'err' | 'unknown';
  lastError?: string;
  query: string;
}

export interface PrometheusServer {
  url: string;
  /** An instant query: the result, or the error Prometheus gave. */
  query(expr: string): Promise<{ ok: boolean; error?: string; result: unknown[] }>;
  alerts(): Promise<PrometheusAlert[]>;
  rules(): Promise<PrometheusRule[]>;
  /** Metric names Prometheus holds for series matching `match` (e.g. `{job="x"}`). */
  names(match: string): Promise<string[]>;
  /** Health of each scrape target (`up`, `down`, `unknown`). */
  targets(): Promise<{ scrapeUrl: string; health: string }[]>;
  stop(): Promise<void>;
}

export async function startPrometheus(opts: { job: string; targets: string[]; ruleFiles: string[] }): Promise<PrometheusServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-prometheus-'));
  const configFile = path.join(dir, 'prometheus.yml');
  fs.writeFileSync(
    configFile,
    stringify({
      global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
      rule_files: opts.ruleFiles,
      scrape_configs: [{ job_name: opts.job, static_configs: [{ targets: opts.targets }] }],
    }),
  );
  let child: ChildProcess | undefined;
  let exited = Promise.resolve();
  const stop = async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  };

  let url = '';
  // A port probed free may be taken before Prometheus binds it (it then exits): another one, a few times.
  for (let attempt = 0; ; attempt++) {
    url = `http://127.0.0.1:${await freePort()}`;
    const c = spawn(
      'prometheus',
      [
        `--config.file=${configFile}`,
        `--storage.tsdb.path=${path.join(dir, 'data')}`,
        `--web.listen-address=${url.slice('http://'.length)}`,
        '--log.level=warn',
      ],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    child = c;
    live.add(c);
    let stderr = '';
    c.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    exited = new Promise<void>((resolve) => c.once('exit', () => (live.delete(c), resolve())));
    const spawnError = new Promise<Error>((resolve) => c.once('error', resolve));
    try {
      for (const until = Date.now() + 30_000; ; await sleep(100)) {
        const failed = await Promise.race([spawnError, sleep(0)]);
        if (failed) throw new Error(`prometheus could not start (${failed.message}): install Debian's prometheus package (.ci/run does)`);
        if (c.exitCode !== null)
          throw Object.assign(new Error(`prometheus exited (${c.exitCode}): ${stderr}`), {
            portTaken: /address already in use/i.test(stderr),
          });
        if (
          await fetch(`${url}/-/ready`).then(
            (r) => r.ok,
            () => false,
          )
        )
          break;
        if (Date.now() > until) throw new Error(`prometheus not ready after 30 s: ${stderr}`);
      }
      break;
    } catch (err) {
      if ((err as { portTaken?: boolean }).portTaken && attempt < 2) continue;
      await stop();
      throw err;
    }
  }

  const api = async <T>(p: string): Promise<{ status: string; data: T; error?: string }> =>
    (await fetch(`${url}${p}`)).json() as Promise<{ status: string; data: T; error?: string }>;
  return {
    url,
    async query(expr) {
      const r = await api<{ result: unknown[] }>(`/api/v1/query?query=${encodeURIComponent(expr)}`);
      return { ok: r.status === 'success', error: r.error, result: r.data?.result ?? [] };
    },
    alerts: async () => (await api<{ alerts: PrometheusAlert[] }>('/api/v1/alerts')).data.alerts,
    rules: async () => (await api<{ groups: { rules: PrometheusRule[] }[] }>('/api/v1/rules')).data.groups.flatMap((g) => g.rules),
    names: async (match) => (await api<string[]>(`/api/v1/label/__name__/values?match[]=${encodeURIComponent(match)}`)).data,
    targets: async () => (await api<{ activeTargets: { scrapeUrl: string; health: string }[] }>('/api/v1/targets')).data.activeTargets,
    stop,
  };
}
