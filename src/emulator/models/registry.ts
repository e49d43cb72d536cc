/**
 * The emulator's models: their list entries, status (switchable by the control API), pricing
 * objects and runners. One registry per emulator instance.
 */
import { createHash } from 'node:crypto';
import express from 'express';
import type { Router } from 'express';
import type { ModelConfig } from '../../config';
import type { EmulatorContext } from '../context';
import type { ModelPricing } from '../../lib/wire';
import { AnalyzerBackend, newAnalyzerCaches } from './backend';
import type { AnalyzerCaches } from './backend';
import type { ModelBackend } from './backend';
import { OpenAIBackend } from './openai-backend';

export type ModelStatus = 'ready' | 'unavailable';

export interface ModelEntry {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  status: ModelStatus;
}

export interface ModelList {
  object: 'list';
  data: ModelEntry[];
}

interface RegisteredModel {
  config: ModelConfig;
  status: ModelStatus;
  created: number;
  pricing: ModelPricing;
  backend: ModelBackend;
}

/** Namespace of the pricing ids (any fixed UUID: ids stay stable across restarts). */
const PRICING_NAMESPACE = '6f1d3c52-8a0e-4f7b-9d21-3b5e8c4a7f10';

/** RFC 4122 version-5 UUID (sha1 of namespace + name). */
export function uuidV5(name: string, namespace: string = PRICING_NAMESPACE): string {
  const ns = Buffer.from(namespace.replaceAll('-', ''), 'hex');
  const h = createHash('sha1').update(ns).update(name, 'utf8').digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const hex = h.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The model's provider: configured, else the id's part before the slash (config requires one of them). */
const providerOf = (c: Pick<ModelConfig, 'id' | 'provider'>): string => c.provider ?? c.id.slice(0, Math.max(0, c.id.indexOf('/')));

function backendOf(c: ModelConfig, charsPerToken: number, caches: AnalyzerCaches): ModelBackend {
  if (c.backend === 'openai') {
    if (!c.baseUrl || !c.remoteModel) throw new Error(`model ${c.id}: backend openai needs baseUrl and remoteModel`);
    return new OpenAIBackend({
      provider: providerOf(c),
      baseUrl: c.baseUrl,
      remoteModel: c.remoteModel,
      timeoutMs: c.timeoutMs,
      ...(c.apiKey ? { apiKey: c.apiKey } : {}),
    });
  }
  return new AnalyzerBackend(c.variant, charsPerToken, caches);
}

export class ModelRegistry {
  private readonly models = new Map<string, RegisteredModel>();

  /** `charsPerToken` is the emulator's token estimate, so the analyzer can size answers to a budget. */
  constructor(models: ModelConfig[], charsPerToken = 4) {
    const bootSeconds = Math.floor(Date.now() / 1000);
    const caches = newAnalyzerCaches();
    for (const c of models) {
      // `created` follows the pricing version date so the list is stable across restarts.
      const versionMs = Date.parse(c.pricing.version);
      this.models.set(c.id, {
        config: c,
        status: c.status,
        created: Number.isFinite(versionMs) ? Math.floor(versionMs / 1000) : bootSeconds,
        pricing: {
          id: uuidV5(c.id),
          model: c.id,
          provider: providerOf(c),
          version: c.pricing.version,
          input_microcents_per_token: c.pricing.input_microcents_per_token,
          output_microcents_per_token: c.pricing.output_microcents_per_token,
          cached_input_microcents_per_token: c.pricing.cached_input_microcents_per_token,
          public: c.pricing.public,
        },
        backend: backendOf(c, charsPerToken, caches),
      });
    }
  }

  get(id: string): (ModelConfig & { status: ModelStatus }) | undefined {
    const m = this.models.get(id);
    return m ? { ...m.config, status: m.status } : undefined;
  }

  list(): ModelList {
    return {
      object: 'list',
      data: [...this.models.values()].map((m) => ({
        id: m.config.id,
        object: 'model',
        created: m.created,
        owned_by: m.config.owned_by ?? providerOf(m.config),
        status: m.status,
      })),
    };
  }

  /** Returns false for an unknown model. */
  setStatus(id: string, status: ModelStatus): boolean {
    const m = this.models.get(id);
    if (!m) return false;
    m.status = status;
    return true;
  }

  pricing(id: string): ModelPricing | undefined {
    const p = this.models.get(id)?.pricing;
    return p ? { ...p } : undefined;
  }

  allPricing(): ModelPricing[] {
    return [...this.models.values()].map((m) => ({ ...m.pricing }));
  }

  backendFor(id: string): ModelBackend | undefined {
    return this.models.get(id)?.backend;
  }
}

/** `GET /models` (no authentication): `{object:'list', data:[{id, object, created, owned_by, status}]}`. */
export function modelsRouter(ctx: EmulatorContext): Router {
  const r = express.Router();
  r.get('/models', (_req, res) => {
    res.json(ctx.models.list());
  });
  return r;
}
