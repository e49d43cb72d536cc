import {
  firstUpstreamRenewalMs,
  keepaliveLease,
  lapsedLease,
  lapsedLeaseReason,
  leaseFrom,
  leaseHolds,
  legacyLeaseMs,
  secondsToSoonestLapse,
  upstreamLeaseAfter,
  upstreamRenewal,
} from '../../../src/gateway/legacy/streams/lease';

const cfg = { leaseTtlSeconds: 45, upstreamKeepaliveSeconds: 60 };

test('a legacy lease lasts leaseTtlSeconds from when it is granted, and holds while its expiry is ahead', () => {
  expect(legacyLeaseMs(cfg)).toBe(45_000);
  expect(leaseFrom(cfg, 1_000)).toBe(46_000);
  expect(leaseHolds(46_000, 45_999)).toBe(true);
  expect(leaseHolds(46_000, 46_000)).toBe(false);
});

test('a keepalive renews the lease only with credits left; refused, it notes when', () => {
  expect(keepaliveLease(cfg, 1_000, 1)).toEqual({ renewed: true, leaseExpiresAtMs: 46_000 });
  expect(keepaliveLease(cfg, 1_000, 0)).toEqual({ renewed: false, creditsRefusedAtMs: 1_000 });
  expect(keepaliveLease(cfg, 1_000, -5)).toEqual({ renewed: false, creditsRefusedAtMs: 1_000 });
});

test("a 429's retry-after: whole seconds to the soonest lapse, at least 1; none without leases", () => {
  expect(secondsToSoonestLapse([], 0)).toBeUndefined();
  expect(secondsToSoonestLapse([30_000, 10_500], 0)).toBe(11);
  expect(secondsToSoonestLapse([500], 1_000)).toBe(1);
});

describe('a lapsed lease', () => {
  const health = (deadline: number | null) => ({ leaseDeadline: () => deadline });

  test('ends, unless a store outage or a failed read of the store covers it', () => {
    expect(lapsedLease(cfg, 1_000, 2_000, { storeFailed: false })).toEqual({ then: 'end' });
    expect(lapsedLease(cfg, 1_000, 2_000, { storeFailed: false, storeHealth: health(1_000) })).toEqual({ then: 'end' });
  });

  test('while the store is down the check asks again', () => {
    expect(lapsedLease(cfg, 1_000, 2_000, { storeFailed: true, storeHealth: health(null) })).toEqual({ then: 'retry' });
  });

  test("an outage's recovery + one lease, or one lease from now after a failed read, whichever is later", () => {
    expect(lapsedLease(cfg, 1_000, 2_000, { storeFailed: false, storeHealth: health(30_000) })).toEqual({ then: 'extend', toMs: 30_000 });
    expect(lapsedLease(cfg, 1_000, 2_000, { storeFailed: true })).toEqual({ then: 'extend', toMs: 47_000 });
    expect(lapsedLease(cfg, 1_000, 2_000, { storeFailed: true, storeHealth: health(90_000) })).toEqual({ then: 'extend', toMs: 90_000 });
  });

  test('ends insufficient_credits after a keepalive refused for credits, else lease_expired', () => {
    expect(lapsedLeaseReason({ creditsRefusedAtMs: 5 })).toBe('insufficientCredits');
    expect(lapsedLeaseReason({ creditsRefusedAtMs: null })).toBe('leaseExpired');
    expect(lapsedLeaseReason({})).toBe('leaseExpired');
    expect(lapsedLeaseReason(undefined)).toBe('leaseExpired');
  });
});

describe('the upstream lease', () => {
  test('is what the upstream told when that is a lease, else what it was (300 s to begin with)', () => {
    expect(upstreamLeaseAfter(undefined)).toBe(300);
    expect(upstreamLeaseAfter(30)).toBe(30);
    for (const told of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) expect(upstreamLeaseAfter(told, 30)).toBe(30);
  });

  test('is renewed every third of it (at most every upstreamKeepaliveSeconds), retried at a tenth (1 s to the period)', () => {
    expect(upstreamRenewal(300, cfg)).toEqual({ everyMs: 60_000, retryMs: 30_000 });
    expect(upstreamRenewal(30, cfg)).toEqual({ everyMs: 10_000, retryMs: 3_000 });
    expect(upstreamRenewal(2, cfg)).toEqual({ everyMs: 1_000, retryMs: 1_000 });
  });

  test('an adopted stream renews it at once, a created one a period after its create', () => {
    expect(firstUpstreamRenewalMs('adopt', 300, cfg)).toBe(0);
    expect(firstUpstreamRenewalMs('create', 300, cfg)).toBe(60_000);
  });
});
