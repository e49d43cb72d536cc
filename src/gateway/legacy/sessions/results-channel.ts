/**
 * The results channel of a stream, what the sessions publish there and the sockets read: one
 * message per result (`r` + the result's JSON) or per end (`e` + the end reason).
 */
export const resultsChannel = (streamId: string): string => `results:${streamId}`;
export const resultEnvelope = (json: string): string => `r${json}`;
export const endEnvelope = (reason: string): string => `e${reason}`;
