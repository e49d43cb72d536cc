/**
 * `/`: what this address is, for a person in a browser (HTML) and for a script or curl (JSON). It
 * shows where requests go, where state lives, how long /v0.2 has left, its brownouts, the legacy
 * streams on this replica and the links worth knowing. Nothing secret: URLs are shown without
 * credentials or query, key hashes only as counts, tokens only as "needs one".
 */
import type { Express, Request, Response } from 'express';
import type { Config } from '../config';
import { displayUrl } from '../lib/display-url';
import { realClock } from '../lib/timers';
import type { Clock } from '../lib/timers';
import { escapeHtml, htmlPage, sendHtml, wantsHtml } from './docs/page';
import type { SunsetPolicy } from './legacy';

const DAY_MS = 86_400_000;
/** One-off brownout windows listed at most (the schema allows 500). */
const MAX_WINDOWS = 20;
const GUIDE = '/docs/migration';

export interface LandingDeps {
  cfg: Pick<Config, 'upstreamUrl' | 'publicUrl' | 'deprecation' | 'telemetry' | 'store'>;
  /** Where /v1beta and /billing go (the embedded emulator's address when `cfg.upstreamUrl` is unset). */
  upstreamUrl: string;
  streams: { readonly activeCount: number };
  fleet: { readonly solo: boolean };
  /** Whether a brownout window is open (the same policy that refuses creates). */
  sunset: Pick<SunsetPolicy, 'windowEnd'>;
  clock?: Pick<Clock, 'now'>;
}

/** What `/` tells, as JSON (the HTML page shows the same). */
export interface LandingFacts {
  service: string;
  description: string;
  public_url: string | null;
  upstream: { url: string; embedded_emulator: boolean };
  store: { kind: 'memory' | 'redis'; address: string | null };
  fleet: { member: boolean; gateway_id: string };
  legacy: {
    state: 'deprecated' | 'brownout' | 'retired' | 'past_sunset';
    deprecated_at: string;
    sunset: string;
    /** Whole days until the sunset (rounded up); 0 or less once it has passed. */
    days_to_sunset: number;
    after_sunset: Config['deprecation']['afterSunset'];
    live_streams_here: number;
  };
  brownouts: {
    /** When the window open now closes (ISO), or null. */
    open_until: string | null;
    /** One-off windows not yet over, soonest first (at most 20; `more_windows` counts the rest). */
    windows: { start: string; end: string }[];
    more_windows: number;
    schedule: { cron: string; duration_minutes: number; timezone: string }[];
    share: number;
    only_keys: number;
    exempt_keys: number;
    results_sockets_too: boolean;
  };
  links: {
    migration_guide: string;
    deprecation_link: string;
    openapi: string;
    healthz: string;
    readyz: string;
    /** Null when metrics are off or served on their own port (`metrics_port`). */
    metrics: string | null;
    metrics_needs_token: boolean;
    metrics_port: number | null;
  };
}

const DESCRIPTION =
  'This gateway keeps customers of the deprecated /v0.2 live-video inference interface working while the provider ' +
  'runs only /v1beta: it serves /v0.2 (streams created with a prompt, results pushed over a WebSocket) by running ' +
  'the streams and their completions on /v1beta, and passes /v1beta and /billing through unchanged at the same address.';

const iso = (s: string) => new Date(Date.parse(s)).toISOString();

export function landingFacts(deps: LandingDeps): LandingFacts {
  const { cfg } = deps;
  const now = (deps.clock ?? realClock).now();
  const d = cfg.deprecation;
  const b = d.brownouts;
  const sunsetMs = Date.parse(d.sunset);
  const past = now >= sunsetMs;
  // Past the sunset with `serve`, brownouts no longer apply (src/gateway/legacy/http/sunset.ts).
  const brownoutsApply = !(past && d.afterSunset === 'serve');
  const openEnd = brownoutsApply ? deps.sunset.windowEnd(now) : undefined;
  const upcoming = b.windows
    .map((w) => ({ start: Date.parse(w.start), end: Date.parse(w.end) }))
    .filter((w) => w.end > now)
    .sort((x, y) => x.start - y.start);
  const metricsHere = cfg.telemetry.metrics && cfg.telemetry.metricsPort === undefined;
  return {
    service: 'legacy-gateway',
    description: DESCRIPTION,
    public_url: cfg.publicUrl ?? null,
    upstream: { url: displayUrl(deps.upstreamUrl), embedded_emulator: cfg.upstreamUrl === undefined },
    store: cfg.store.redisUrl ? { kind: 'redis', address: displayUrl(cfg.store.redisUrl) } : { kind: 'memory', address: null },
    fleet: { member: !deps.fleet.solo, gateway_id: cfg.store.gatewayId },
    legacy: {
      state: past && d.afterSunset === 'refuse' ? 'retired' : openEnd !== undefined ? 'brownout' : past ? 'past_sunset' : 'deprecated',
      deprecated_at: iso(d.date),
      sunset: iso(d.sunset),
      days_to_sunset: Math.ceil((sunsetMs - now) / DAY_MS),
      after_sunset: d.afterSunset,
      live_streams_here: deps.streams.activeCount,
    },
    brownouts: {
      open_until: openEnd === undefined ? null : new Date(openEnd).toISOString(),
      windows: upcoming.slice(0, MAX_WINDOWS).map((w) => ({ start: new Date(w.start).toISOString(), end: new Date(w.end).toISOString() })),
      more_windows: Math.max(0, upcoming.length - MAX_WINDOWS),
      schedule: b.schedule.map((s) => ({ cron: s.cron, duration_minutes: s.durationMinutes, timezone: s.timezone })),
      share: b.share,
      only_keys: b.onlyKeys.length,
      exempt_keys: b.exemptKeys.length,
      results_sockets_too: b.sockets,
    },
    links: {
      migration_guide: GUIDE,
      deprecation_link: d.link,
      openapi: '/v0.2/openapi.json',
      healthz: '/healthz',
      readyz: '/readyz',
      metrics: metricsHere ? '/metrics' : null,
      metrics_needs_token: metricsHere && cfg.telemetry.metricsToken !== undefined,
      metrics_port: cfg.telemetry.metrics ? (cfg.telemetry.metricsPort ?? null) : null,
    },
  };
}

const DATE_TIME: Intl.DateTimeFormatOptions = { dateStyle: 'medium', timeStyle: 'short', timeZone: 'UTC' };
const DATE: Intl.DateTimeFormatOptions = { dateStyle: 'long', timeZone: 'UTC' };
const when = (isoText: string, o = DATE_TIME) =>
  `${new Intl.DateTimeFormat('en-GB', o).format(new Date(isoText))}${o === DATE ? '' : ' UTC'}`;
const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

function legacyCallout(f: LandingFacts): string {
  const l = f.legacy;
  const sunset = escapeHtml(when(l.sunset, DATE));
  const guide = `<a href="${GUIDE}">migration guide</a>`;
  if (l.state === 'retired') {
    return (
      `<div class="callout bad"><p><strong>/v0.2 is retired</strong> since ${sunset}: new /v0.2 streams are refused (410). ` +
      `Move to /v1beta with the ${guide}.</p></div>`
    );
  }
  if (l.state === 'brownout') {
    return (
      `<div class="callout bad"><p><strong>A scheduled /v0.2 brownout is on</strong> until ${escapeHtml(when(f.brownouts.open_until!))}: ` +
      `new /v0.2 streams are refused with 503; running ones keep going.</p><p>Sunset: ${sunset}. Read the ${guide}.</p></div>`
    );
  }
  if (l.state === 'past_sunset') {
    return (
      `<div class="callout warn"><p><strong>/v0.2 passed its sunset</strong> on ${sunset} and is still served here for now. ` +
      `Move to /v1beta with the ${guide}.</p></div>`
    );
  }
  const days = l.days_to_sunset;
  return (
    `<div class="callout warn"><p><strong>/v0.2 is deprecated.</strong> It stops on ${sunset}, ` +
    `<strong>${escapeHtml(plural(days, 'day'))}</strong> from now. /v1beta is served at this same address with the same API keys: ` +
    `the ${guide} shows every change.</p></div>`
  );
}

function card(title: string, value: string, note: string): string {
  return `<div class="card"><h3>${escapeHtml(title)}</h3><div class="value">${value}</div><p>${note}</p></div>`;
}

function brownoutSection(f: LandingFacts): string {
  const b = f.brownouts;
  const items: string[] = [];
  for (const w of b.windows) items.push(`<li>${escapeHtml(when(w.start))} → ${escapeHtml(when(w.end))}</li>`);
  if (b.more_windows > 0) items.push(`<li>and ${escapeHtml(plural(b.more_windows, 'more window'))}</li>`);
  for (const s of b.schedule) {
    items.push(
      `<li>every match of <code>${escapeHtml(s.cron)}</code> (${escapeHtml(s.timezone)}), for ${escapeHtml(plural(s.duration_minutes, 'minute'))}</li>`,
    );
  }
  if (items.length === 0) return '<p>No brownout is scheduled.</p>';
  const who: string[] = [];
  if (b.share < 1) who.push(`${escapeHtml(Math.round(b.share * 1000) / 10)} % of keys`);
  if (b.only_keys > 0) who.push(`only ${escapeHtml(plural(b.only_keys, 'listed key'))}`);
  if (b.exempt_keys > 0) who.push(`${escapeHtml(plural(b.exempt_keys, 'key'))} exempt`);
  return (
    '<p>During a brownout, new /v0.2 streams are refused with 503 and a message naming the sunset and the guide; ' +
    `streams already running keep working${b.results_sockets_too ? ', but new results sockets are refused too' : ''}.` +
    `${who.length ? ` Applies to ${who.join(', ')}.` : ''}</p><ul>${items.join('')}</ul>`
  );
}

function linksSection(f: LandingFacts): string {
  const l = f.links;
  const rows: [string, string][] = [
    [
      `<a href="${l.migration_guide}">${l.migration_guide}</a>`,
      'the migration guide from /v0.2 to /v1beta, in this deployment’s names (markdown for curl)',
    ],
    [`<a href="${l.openapi}">${l.openapi}</a>`, 'the OpenAPI 3.1 document of /v0.2 (every operation deprecated)'],
    [`<a href="${l.healthz}">${l.healthz}</a>`, 'liveness: <code>ok</code> while the process serves'],
    [`<a href="${l.readyz}">${l.readyz}</a>`, 'readiness: whether this replica can serve (what load balancers ask)'],
  ];
  if (l.metrics) {
    rows.push([
      l.metrics_needs_token ? l.metrics : `<a href="${l.metrics}">${l.metrics}</a>`,
      `Prometheus metrics${l.metrics_needs_token ? ' (needs <code>Authorization: Bearer</code> with the metrics token)' : ''}`,
    ]);
  } else if (l.metrics_port !== null) {
    rows.push(['/metrics', `Prometheus metrics, on port ${escapeHtml(l.metrics_port)} only`]);
  }
  if (l.deprecation_link !== l.migration_guide) {
    rows.push([escapeHtml(l.deprecation_link), 'where the <code>Link</code> deprecation header of /v0.2 responses points']);
  }
  return `<dl class="links">${rows.map(([dt, dd]) => `<dt>${dt}</dt><dd>${dd}</dd>`).join('')}</dl>`;
}

export function landingHtml(f: LandingFacts): string {
  const upstream = f.upstream.embedded_emulator
    ? 'the embedded emulator: a faithful local /v1beta + /billing (no upstream configured)'
    : 'the provider’s /v1beta + /billing';
  const store =
    f.store.kind === 'redis'
      ? card('Store', 'Redis', `<code>${escapeHtml(f.store.address ?? '')}</code>, shared by the fleet`)
      : card('Store', 'In memory', 'this process only');
  const fleet = f.fleet.member
    ? card('Fleet', 'Fleet member', `gateway id <code>${escapeHtml(f.fleet.gateway_id)}</code>`)
    : card('Fleet', 'Solo', `gateway id <code>${escapeHtml(f.fleet.gateway_id)}</code>`);
  const days = f.legacy.days_to_sunset;
  const body =
    '<h1>/v0.2 → /v1beta gateway</h1>' +
    `<p class="lead">${escapeHtml(f.description)}</p>` +
    legacyCallout(f) +
    '<div class="grid">' +
    card(
      'Sunset',
      days > 0 ? escapeHtml(plural(days, 'day')) : 'passed',
      `${escapeHtml(when(f.legacy.sunset, DATE))} (deprecated since ${escapeHtml(when(f.legacy.deprecated_at, DATE))})`,
    ) +
    card('Live /v0.2 streams', escapeHtml(f.legacy.live_streams_here), 'on this replica') +
    card('Upstream', `<code>${escapeHtml(f.upstream.url)}</code>`, escapeHtml(upstream)) +
    store +
    fleet +
    '</div>' +
    '<h2 id="brownouts">Brownouts</h2>' +
    brownoutSection(f) +
    '<h2 id="links">Links</h2>' +
    linksSection(f) +
    `<p>The same facts as JSON: <code>curl ${escapeHtml(f.public_url?.replace(/\/+$/, '') ?? '<this address>')}/</code> ` +
    '(anything but a browser gets JSON here, and the guide as markdown).</p>';
  return htmlPage({ title: 'Legacy gateway: /v0.2 on top of /v1beta', body });
}

/** `GET /` (and HEAD): HTML for a browser, JSON for everyone else (curl, scripts, `Accept: application/json`). */
export function mountLanding(app: Express, deps: LandingDeps): void {
  app.get('/', (req: Request, res: Response) => {
    res.vary('Accept');
    // Live figures: never from a cache.
    res.setHeader('Cache-Control', 'no-store');
    const facts = landingFacts(deps);
    if (wantsHtml(req, 'application/json')) sendHtml(res, landingHtml(facts));
    else res.json(facts);
  });
}
