/**
 * The interface carries the provider's brand and its media-room vendor in several places.
 * Both are configuration (spec/legacy-clients.md); every name derived from them lives here.
 */
export interface Brand {
  /** Reference scheme, e.g. `svc` in `svc://streams/{id}`. */
  scheme: string;
  /** API key prefix, e.g. `svc-`. */
  keyPrefix: string;
  /** Value of `inference.backend` for the provider's own backend. */
  backend: string;
  /** Field of a chat-completion response holding cache details. */
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

export function brandOf(cfg: { brand: string; roomVendor: string }): Brand {
  const cap = cfg.brand.charAt(0).toUpperCase() + cfg.brand.slice(1);
  return {
    scheme: cfg.brand,
    keyPrefix: `${cfg.brand}-`,
    backend: cfg.brand,
    responseField: cfg.brand,
    regionHeader: `x-${cfg.brand}-region`,
    regionHeaderDisplay: `X-${cap}-Region`,
    room: cfg.roomVendor,
    roomDisconnected: `${cfg.roomVendor}_disconnected`,
    roomTokenField: `${cfg.roomVendor}_token`,
  };
}
