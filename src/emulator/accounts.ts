import { createHash } from 'node:crypto';
import type { AccountConfig } from '../config';
import { parseBearer } from '../lib/bearer';
import { detailError } from '../lib/errors';
import type { Balance } from '../lib/wire';

export type { Balance };

export interface Account {
  id: string;
  name: string;
  balanceMicrocents: number;
}

export const MICROCENTS_PER_CENT = 1_000_000;

/**
 * Accounts, their API keys and the prepaid ledger. Keys are held as sha256 hashes only, so a key
 * never sits in memory dumps or logs beyond the request that carried it.
 */
export class Accounts {
  private readonly byId = new Map<string, Account>();
  private readonly byKeyHash = new Map<string, { accountId: string; revoked: boolean }>();

  constructor(configs: AccountConfig[]) {
    for (const c of configs) {
      this.byId.set(c.id, { id: c.id, name: c.name, balanceMicrocents: c.balance_microcents });
      for (const k of c.keys) this.byKeyHash.set(fullHash(k.key), { accountId: c.id, revoked: k.revoked });
    }
  }

  /** Resolves `Authorization: Bearer <key>` to an account, or throws 401 `{detail}`. */
  authenticate(authorization: string | undefined): Account {
    const key = parseBearer(authorization);
    if (!key) throw detailError(401, 'missing_api_key', 'Missing API key: send Authorization: Bearer <api_key>');
    return this.authenticateKey(key);
  }

  /** Resolves a bare API key to an account, or throws 401 `{detail}`. */
  authenticateKey(key: string): Account {
    const entry = this.byKeyHash.get(fullHash(key));
    if (!entry) throw detailError(401, 'invalid_api_key', 'Invalid API key');
    if (entry.revoked) throw detailError(401, 'revoked_api_key', 'API key has been revoked');
    return this.byId.get(entry.accountId)!;
  }

  get(id: string): Account | undefined {
    return this.byId.get(id);
  }

  list(): Account[] {
    return [...this.byId.values()];
  }

  canPay(accountId: string, microcents: number): boolean {
    const a = this.byId.get(accountId);
    return !!a && a.balanceMicrocents >= microcents;
  }

  /** Debits the ledger; never below zero (the caller checked `canPay` for the estimate). */
  charge(accountId: string, microcents: number): void {
    const a = this.byId.get(accountId);
    if (a) a.balanceMicrocents = Math.max(0, a.balanceMicrocents - Math.max(0, Math.round(microcents)));
  }

  /** Credits the ledger (a paid checkout); the balance stays an exact integer. */
  credit(accountId: string, microcents: number): boolean {
    const a = this.byId.get(accountId);
    if (!a) return false;
    a.balanceMicrocents = Math.min(Number.MAX_SAFE_INTEGER, a.balanceMicrocents + Math.max(0, Math.round(microcents)));
    return true;
  }

  setBalance(accountId: string, microcents: number): boolean {
    const a = this.byId.get(accountId);
    if (!a) return false;
    a.balanceMicrocents = Math.max(0, Math.round(microcents));
    return true;
  }

  balance(accountId: string): Balance {
    const a = this.byId.get(accountId)!;
    return {
      user_id: a.id,
      balance_microcents: a.balanceMicrocents,
      balance_cents: Math.floor(a.balanceMicrocents / MICROCENTS_PER_CENT),
    };
  }
}

function fullHash(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}
