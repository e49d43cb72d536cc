/**
 * The front door of the /v0.2 adapter: everything the rest of the gateway uses of it. Inside, three
 * layers: `contract/` (the legacy wire: schemas, validation, translation, responses, closes, errors,
 * OpenAPI; pure), `sessions/` (the lifecycle of live streams) and `http/` (routes, results sockets,
 * access, sunset), each importing only the layers below it.
 */
export { LEGACY_CLOSES, legacyEndReasons, tryLaterClose } from './contract/closes';
export type { LegacyClose } from './contract/closes';
export { LEGACY_ERRORS } from './contract/errors';
export { legacyOpenApi } from './contract/openapi';
export type { LegacyMedia } from './contract/responses';
export type { ClipSpec, FrameSpec, SessionSpec } from './contract/spec';
export { toLegacyError } from './contract/upstream-errors';
export { legacyError, legacyErrorRequestId, legacyJsonInvalid, legacyValidationError } from './contract/validate';

export { UpstreamCatalog } from './sessions/catalog';
export { fanOut } from './sessions/ports';
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
} from './sessions/ports';
export { nativeSource } from './sessions/sources';
export { LegacySessions } from './sessions/sessions';

export { socketAuthorizer } from './http/access';
export { legacyBody } from './http/body';
export { FailedAuthLimiter } from './http/auth-failures';
export { ResultsSockets } from './http/results-socket';
export type { ResultsSocketHooks } from './http/results-socket';
export { legacyRouter } from './http/routes';
export { SunsetPolicy } from './http/sunset';
export type { RefusalReason } from './http/sunset';
