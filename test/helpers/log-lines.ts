import { Writable } from 'node:stream';

/** A pino destination that keeps every written line (for asserting what reached the log). */
export function logLines(): { sink: Writable; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(
        ...chunk
          .toString()
          .split('\n')
          .filter((l) => l.length > 0),
      );
      done();
    },
  });
  return { sink, lines };
}
