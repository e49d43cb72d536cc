import { DEFAULT_DEPRECATION } from './config';
import type { Config } from './config';

/**
 * What `serve` refuses or warns about before it starts. Production without an upstream would
 * silently serve the emulator's fake models and dev keys: refused unless asked for explicitly.
 */
export function bootChecks(cfg: Config, env: NodeJS.ProcessEnv): { refuse?: string; warnings: string[] } {
  const warnings: string[] = [];
  if (cfg.deprecation.date === DEFAULT_DEPRECATION.date || cfg.deprecation.sunset === DEFAULT_DEPRECATION.sunset) {
    warnings.push(
      `deprecation dates are the shipped defaults (date ${cfg.deprecation.date}, sunset ${cfg.deprecation.sunset}): ` +
        'set DEPRECATION_DATE and DEPRECATION_SUNSET to the announced ones',
    );
  }
  if (cfg.store.redisUrl && cfg.server.trustProxy === undefined) {
    warnings.push(
      'server.trustProxy (TRUST_PROXY) is unset in a fleet: behind a load balancer every request comes from its address, ' +
        'so one client over the failed-authentication budget gets unknown keys refused for all, and access lines show the balancer. ' +
        'Set it to the balancer\'s hop count or addresses (docs/operations.md "Behind a load balancer"), ' +
        'or to false when clients reach the gateway directly',
    );
  }
  if (env.NODE_ENV === 'production' && !cfg.upstreamUrl && !cfg.embeddedEmulator) {
    return {
      refuse:
        'refusing to start: NODE_ENV=production and no UPSTREAM_URL. Set UPSTREAM_URL to the /v1beta provider, ' +
        'or EMULATOR_EMBEDDED=true (config embeddedEmulator) to serve the embedded emulator on purpose.',
      warnings,
    };
  }
  if (cfg.store.redisUrl && !cfg.store.secret) {
    return {
      refuse:
        'refusing to start: REDIS_URL (store.redisUrl) is set but GATEWAY_SECRET is not. ' +
        'Set GATEWAY_SECRET (or GATEWAY_SECRET_FILE; config store.secret) to the same secret of at least 32 characters on every replica.',
      warnings,
    };
  }
  return { warnings };
}
