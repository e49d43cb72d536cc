/**
 * The front door of the /v0.2 adapter: everything the rest of the gateway uses of it. Inside, three
 * layers: `contract/` (the legacy wire: schemas, validation, translation, responses, closes, errors,
 * OpenAPI; pure), `streams/` (the lifecycle of live streams) and `http/` (routes, results sockets,
 * access, sunset), each importing only the layers below it.
 */
export { LEGACY_CLOSES, legacyEndReasons, tryLaterClose } from './contract/closes';
export type { LegacyClose } from './contract/closes';
export { LEGACY_ERRORS } from './contract/errors';
export { legacyOpenApi } from './contract/openapi';
export type { LegacyMedia } from './contract/responses';
export type { ClipSpec, FrameSpec, StreamSpec } from './contract/spec';
export { toLegacyError } from './contract/upstream-errors';
export { legacyError, legacyErrorRequestId, legacyJsonInvalid, legacyValidationError } from './contract/validate';

export { UpstreamCatalog } from './streams/catalog';
export type {
  FleetLink,
  HandOverOptions,
  LegacyObserver,
  MediaRelay,
  MediaSessionRef,
  OwnerMessage,
  RelayStart,
  SourceContext,
  SourceStarted,
  StreamSource,
  StreamSources,
} from './streams/ports';
export { nativeSource } from './streams/sources';
export { LegacyStreams } from './streams/legacy-streams';

export { socketAuthorizer } from './http/access';
export { legacyBody } from './http/body';
export { FailedAuthLimiter } from './http/auth-failures';
export { ResultsSockets } from './http/results-socket';
export type { ResultsSocketHooks } from './http/results-socket';
export { legacyRouter } from './http/routes';
export { SunsetPolicy } from './http/sunset';
export type { RefusalReason } from './http/sunset';
