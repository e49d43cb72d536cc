/**
 * The interface carries the provider's brand and its media-room vendor in several places. The
 * provider writes its brand two ways: its abbreviation in API keys and frame references (`ovs-…`,
 * `ovs://streams/…`) and its name everywhere else (`backend: "overshoot"`, the completion's
 * `overshoot` field, `X-Overshoot-Region`). All of them are configuration
 * (spec/legacy-clients.md); every name derived from them lives here.
 */
export interface Brand {
  /** The brand's name (`brand`), e.g. `svc`. */
  name: string;
  /** Reference scheme, e.g. `svc` in `svc://streams/{id}` (the abbreviation). */
  scheme: string;
  /** API key prefix, e.g. `svc-` (the abbreviation and a dash). */
  keyPrefix: string;
  /** Value of `inference.backend` for the provider's own backend (the name). */
  backend: string;
  /** The other `inference.backend` value the provider accepts (a third-party model host). */
  thirdPartyBackend: string;
  /** Field of a chat-completion response holding cache details (the name). */
  responseField: string;
  /** Region header, lower case (Node's header keys), e.g. `x-svc-region`. */
  regionHeader: string;
  /** Region header as clients write it, e.g. `X-Svc-Region`. */
  regionHeaderDisplay: string;
  /** `publish.type` of a v1beta create, legacy `source.type` for a customer room, legacy response field. */
  room: string;
  /** Legacy end reason when the customer's room goes away. */
  roomDisconnected: string;
  /** Legacy keepalive field carrying a fresh publish token. */
  roomTokenField: string;
}

export interface BrandSettings {
  brand: string;
  /** Defaults to the brand. */
  brandAbbreviation?: string | undefined;
  /** Defaults to `thirdparty`. */
  thirdPartyBackend?: string | undefined;
  roomVendor: string;
}

export const DEFAULT_THIRD_PARTY_BACKEND = 'thirdparty';

export function brandOf(cfg: BrandSettings): Brand {
  const name = cfg.brand;
  const abbreviation = cfg.brandAbbreviation ?? name;
  const cap = name.charAt(0).toUpperCase() + name.slice(1);
  return {
    name,
    scheme: abbreviation,
    keyPrefix: `${abbreviation}-`,
    backend: name,
    thirdPartyBackend: cfg.thirdPartyBackend ?? DEFAULT_THIRD_PARTY_BACKEND,
    responseField: name,
    regionHeader: `x-${name}-region`,
    regionHeaderDisplay: `X-${cap}-Region`,
    room: cfg.roomVendor,
    roomDisconnected: `${cfg.roomVendor}_disconnected`,
    roomTokenField: `${cfg.roomVendor}_token`,
  };
}

/** The effective tokens, for the boot log. */
export function brandTokens(brand: Brand) {
  return {
    keyPrefix: brand.keyPrefix,
    scheme: `${brand.scheme}://`,
    backends: [brand.backend, brand.thirdPartyBackend],
    responseField: brand.responseField,
    regionHeader: brand.regionHeaderDisplay,
    roomVendor: brand.room,
  };
}
