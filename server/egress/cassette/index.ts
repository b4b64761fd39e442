/**
 * The cassette engine (docs/cassettes.md): redaction, the tape every run's calls are taken down on, matching
 * and playback, and the files. The interfaces are in ./types.ts; the HTTP wiring is elsewhere
 * (server/egress/proxy.ts, services/egress.ts).
 */
export * from './types';
export { createRedactor, secretMarker, CREDENTIAL_HEADERS, REDACTED_VALUE, MIN_SECRET_LENGTH, type ByteRedactor } from './redact';
export { createTape, redactEntry, redactCassette, DEFAULT_MAX_BODY_BYTES, TRUNCATED_NOTE, type TapeOptions } from './tape';
export { normalise, differences, matchInputOfEntry, type MatchInput, type NormalisedRequest } from './match';
export { createPlayer, playEntry, type PlayerOptions } from './player';
export { FileCassetteStore, summarize, effectiveMatch, type FileCassetteStoreOptions } from './store';
export {
  parseCassette,
  checkCassette,
  cassetteText,
  emptyCassette,
  episodesOf,
  fromBrowserHar,
  migrateLog,
  FORMAT_STEPS,
  IMPORTED_EPISODE,
} from './har';
