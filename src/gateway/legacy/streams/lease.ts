/**
 * The lease policy of legacy streams, decisions only (no store, upstream call or timer): how long a
 * legacy lease lasts and what a keepalive does to it, what the lease check does with a lapsed one
 * and why it ends its stream, and when the owner renews the upstream stream's own lease. The I/O
 * around them: the create and the keepalive (./legacy-streams.ts), the lease check and the upstream
 * keepalive (./timers.ts), a create's or an adoption's start (./stream-start.ts).
 */
import type { LegacyConfig } from '../../../config';
import type { StoreHealth } from '../../store/outage';
import type { StreamRecord } from '../../store/store';
import type { LegacyEndReasons } from '../contract/closes';

type LeaseConfig = Pick<LegacyConfig, 'leaseTtlSeconds'>;

// ── The legacy lease ──

/** The legacy lease's length (ms): `legacy.leaseTtlSeconds`, the `ttl_seconds` a create and a keepalive answer. */
export function legacyLeaseMs(cfg: LeaseConfig): number {
  return cfg.leaseTtlSeconds * 1000;
}

/** When a lease granted at `nowMs` (a create's, a keepalive's) lapses: one lease length later. */
export function leaseFrom(cfg: LeaseConfig, nowMs: number): number {
  return nowMs + legacyLeaseMs(cfg);
}

/** A lease holds at `nowMs` while its expiry is ahead. */
export function leaseHolds(expiresAtMs: number, nowMs: number): boolean {
  return expiresAtMs > nowMs;
}

/**
 * Seconds until the soonest of `expiries` lapses if not renewed (at least 1: a 429's retry-after),
 * undefined when there are none.
 */
export function secondsToSoonestLapse(expiries: readonly number[], nowMs: number): number | undefined {
  if (!expiries.length) return undefined;
  return Math.max(1, Math.ceil((Math.min(...expiries) - nowMs) / 1000));
}

/**
 * What a keepalive at `nowMs` does to the lease: with credits left it is renewed for one lease
 * length (the store zeroes the cost since the previous keepalive, and a refusal noted before is
 * cleared). Without, it is not renewed and the refusal is noted: the stream runs until its lease
 * lapses and then ends `insufficient_credits`, so a customer who tops up and keeps alive in time
 * keeps the stream.
 */
export type KeepaliveLease = { renewed: true; leaseExpiresAtMs: number } | { renewed: false; creditsRefusedAtMs: number };

export function keepaliveLease(cfg: LeaseConfig, nowMs: number, balanceMicrocents: number): KeepaliveLease {
  return balanceMicrocents > 0 ? { renewed: true, leaseExpiresAtMs: leaseFrom(cfg, nowMs) } : { renewed: false, creditsRefusedAtMs: nowMs };
}

// ── The lease check (./timers.ts) ──

/** How soon a lease check that could not read the store asks again. */
export const LEASE_CHECK_RETRY_MS = 1000;

/**
 * What the lease check does with a lease the store holds lapsed at `nowMs`; a store outage never
 * ends one (`StoreHealth.leaseDeadline`): while the store is down it asks again (`retry`); one that
 * lapsed during or after an outage is extended to that outage's recovery plus one lease length, and
 * after a failed read of the store to one lease length from now (`extend`). Otherwise it ends.
 */
export type LapsedLease = { then: 'retry' } | { then: 'extend'; toMs: number } | { then: 'end' };

export function lapsedLease(
  cfg: LeaseConfig,
  expiresAtMs: number,
  nowMs: number,
  opts: { storeFailed: boolean; storeHealth?: Pick<StoreHealth, 'leaseDeadline'> },
): LapsedLease {
  const leaseMs = legacyLeaseMs(cfg);
  const deadline = opts.storeHealth?.leaseDeadline(expiresAtMs, leaseMs);
  if (deadline === null) return { then: 'retry' };
  const toMs = Math.max(deadline ?? 0, opts.storeFailed ? nowMs + leaseMs : 0);
  return leaseHolds(toMs, nowMs) ? { then: 'extend', toMs } : { then: 'end' };
}

/**
 * Why a lapsed lease ends its stream: `insufficient_credits` when the latest keepalive was refused
 * for credits (its record says so), else `lease_expired` (also when the record is gone).
 */
export function lapsedLeaseReason(
  rec: Pick<StreamRecord, 'creditsRefusedAtMs'> | undefined,
): keyof Pick<LegacyEndReasons, 'insufficientCredits' | 'leaseExpired'> {
  return rec?.creditsRefusedAtMs != null ? 'insufficientCredits' : 'leaseExpired';
}

// ── The upstream lease ──

/** The contract's upstream lease (`ttl_seconds` 300), when the upstream has not said otherwise. */
const DEFAULT_UPSTREAM_LEASE_SECONDS = 300;

/**
 * The upstream lease's length (s) once the upstream told `toldSeconds` (a create's or a keepalive's
 * `ttl_seconds`, or the record's): that, when it is a lease (a positive finite number), else `currentSeconds`.
 */
export function upstreamLeaseAfter(toldSeconds: number | undefined, currentSeconds = DEFAULT_UPSTREAM_LEASE_SECONDS): number {
  return typeof toldSeconds === 'number' && Number.isFinite(toldSeconds) && toldSeconds > 0 ? toldSeconds : currentSeconds;
}

type UpstreamRenewalConfig = Pick<LegacyConfig, 'upstreamKeepaliveSeconds'>;

/**
 * When the owner renews an upstream lease of `leaseSeconds`: every third of it, at most every
 * `upstreamKeepaliveSeconds`, at least every 1 s; after a failed renewal, a tenth of it (at least
 * 1 s, at most the period), so a short lease (30 s) survives two failed renewals.
 */
export function upstreamRenewal(leaseSeconds: number, cfg: UpstreamRenewalConfig): { everyMs: number; retryMs: number } {
  const leaseMs = leaseSeconds * 1000;
  const everyMs = Math.max(1000, Math.min(leaseMs / 3, cfg.upstreamKeepaliveSeconds * 1000));
  return { everyMs, retryMs: Math.min(everyMs, Math.max(1000, leaseMs / 10)) };
}

/**
 * When a stream starting here first renews its upstream lease: an adopted one at once (when its
 * previous owner last renewed is not known here), a created one a renewal period after its create.
 */
export function firstUpstreamRenewalMs(from: 'create' | 'adopt', leaseSeconds: number, cfg: UpstreamRenewalConfig): number {
  return from === 'adopt' ? 0 : upstreamRenewal(leaseSeconds, cfg).everyMs;
}
