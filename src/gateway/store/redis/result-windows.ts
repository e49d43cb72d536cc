import { parseResultWindow } from '../result-windows';
import type { ResultWindow, ResultWindows } from '../result-windows';
import { RedisRole } from './role';
import { windowTtl } from './sessions';

/** Reinfer's result windows: one string each, expiring on its own. */
export class RedisResultWindows extends RedisRole implements ResultWindows {
  async putResultWindow(resultId: string, window: ResultWindow, ttlMs: number): Promise<void> {
    return this.guard('putResultWindow', async () => {
      await this.redis.set(this.key.resultWindow(resultId), JSON.stringify(window), 'PX', windowTtl(ttlMs));
    });
  }

  async getResultWindow(resultId: string): Promise<ResultWindow | undefined> {
    return this.guard('getResultWindow', async () => parseResultWindow(await this.redis.get(this.key.resultWindow(resultId))));
  }
}
