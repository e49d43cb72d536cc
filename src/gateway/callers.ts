/**
 * Who is calling /v0.2 and whether their key is good: the upstream catalog (models, accounts, key
 * verdicts, cached), the one client address of a request (`server.trustProxy`), and the
 * failed-authentication budget counted on that address.
 */
import type { Config } from '../config';
import { clientAddresses, compileTrust } from '../lib/client-address';
import type { Logger } from '../lib/logger';
import type { Clock } from '../lib/timers';
import type { UpstreamClient } from '../upstream/client';
import { FailedAuthLimiter, UpstreamCatalog } from './legacy';

export type CallerChecks = ReturnType<typeof callerChecks>;

export function callerChecks(cfg: Config, logger: Logger, upstream: UpstreamClient, clock: Clock | undefined) {
  const failures = cfg.legacy.upstreamFailures;
  const catalog = new UpstreamCatalog(upstream, {
    modelsCacheMs: cfg.legacy.modelsCacheMs,
    accountCacheMs: 60_000,
    negativeKeyCacheMs: failures.negativeKeyCacheMs,
    negativeKeyCacheSize: failures.negativeKeyCacheSize,
    logger,
    clock,
  });
  // Compiled once: the failed-auth budget and access lines use the address it gives, and Express is
  // told the same trust so `req.ip` would agree.
  const trust = compileTrust(cfg.server.trustProxy ?? false);
  const authLimiter = new FailedAuthLimiter({
    perMinute: failures.authFailuresPerMinute,
    clock,
    onOverBudget: (ip) =>
      logger.warn(
        { clientAddress: ip, perMinute: failures.authFailuresPerMinute },
        `failed-authentication budget used up by ${ip}: its unknown keys are refused for the rest of the minute` +
          (trust ? '' : " (server.trustProxy is off: behind a load balancer this is the balancer's address)"),
      ),
  });
  return { catalog, trust, clientAddress: clientAddresses(trust), authLimiter };
}
