/**
 * How log lines look: `LOG_PRETTY` (`logPretty`) decides when set; unset, pretty only on a
 * terminal outside production. The pretty destination prints lines for a person; JSON stays one
 * object a line.
 */
import { PassThrough } from 'node:stream';
import { ConfigError, loadConfig } from '../../src/config';
import pino from 'pino';
import { atLogTime, createLogger, LOG_TIME, logFormat, prettyDestination } from '../../src/lib/logger';

describe('logFormat', () => {
  test.each([
    // logPretty, stdout is a terminal, NODE_ENV → format
    [undefined, true, undefined, 'pretty'],
    [undefined, true, 'development', 'pretty'],
    [undefined, true, 'production', 'json'],
    [undefined, false, undefined, 'json'],
    [undefined, undefined, undefined, 'json'],
    [true, false, undefined, 'pretty'],
    [true, false, 'production', 'pretty'],
    [false, true, undefined, 'json'],
    [false, true, 'development', 'json'],
  ] as const)('logPretty %p, TTY %p, NODE_ENV %p → %s', (logPretty, isTTY, nodeEnv, format) => {
    expect(logFormat({ logPretty, isTTY, nodeEnv })).toBe(format);
  });

  test('LOG_PRETTY sets logPretty (true/false and the usual spellings); anything else stops the boot', () => {
    expect(loadConfig({ env: {} }).logPretty).toBeUndefined();
    expect(loadConfig({ env: { LOG_PRETTY: 'true' } }).logPretty).toBe(true);
    expect(loadConfig({ env: { LOG_PRETTY: '0' } }).logPretty).toBe(false);
    expect(loadConfig({ env: { LOG_PRETTY: 'no' } }).logPretty).toBe(false);
    expect(() => loadConfig({ env: { LOG_PRETTY: 'sometimes' } })).toThrow(ConfigError);
    expect(() => loadConfig({ env: { LOG_PRETTY: 'sometimes' } })).toThrow(/LOG_PRETTY: expected true or false/);
  });
});

describe('the destinations', () => {
  const capture = () => {
    const out = new PassThrough();
    let text = '';
    out.on('data', (d: Buffer) => (text += d.toString()));
    return { out, text: () => text };
  };

  test('pretty: a line a person reads (level, message, fields), no colours off a terminal, secrets still redacted', () => {
    const c = capture();
    const log = createLogger('info', 'gateway', prettyDestination(false, c.out));
    log.info({ streamId: 's-1', authorization: 'Bearer svc-secret' }, 'legacy stream ended');
    const text = c.text();
    expect(text).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO \(gateway\): legacy stream ended · streamId=s-1 authorization=\[redacted\]\n$/);
    expect(text).not.toContain('svc-secret');
    expect(text).not.toContain('\u001b[');
    expect(() => JSON.parse(text)).toThrow();
  });

  test('JSON: one object a line, with the mixin fields when given', () => {
    const c = capture();
    const log = createLogger('info', 'gateway', c.out, { mixin: () => ({ traceId: 't'.repeat(32) }) });
    log.info({ n: 1 }, 'hello');
    expect(JSON.parse(c.text())).toMatchObject({ msg: 'hello', n: 1, traceId: 't'.repeat(32), level: 30 });
  });
});

describe('LOG_TIME', () => {
  afterEach(() => jest.restoreAllMocks());

  test.each([0, 7, 42, 999, 1000, 1_764_224_970_048, 1_764_224_970_999, 1_764_224_971_000, 1_764_224_971_005, -1, -1001])(
    'at %d ms it writes what pino isoTime writes',
    (now) => {
      jest.spyOn(Date, 'now').mockReturnValue(now);
      expect(LOG_TIME()).toBe(pino.stdTimeFunctions.isoTime());
    },
  );

  test('atLogTime dates the lines written inside it, and only those', () => {
    const now = 1_764_224_971_005;
    const then = 1_764_224_970_048.7;
    jest.spyOn(Date, 'now').mockReturnValue(then);
    const expected = pino.stdTimeFunctions.isoTime();
    jest.spyOn(Date, 'now').mockReturnValue(now);
    const seen: string[] = [];
    atLogTime(then, () => seen.push(LOG_TIME()));
    expect(seen).toEqual([expected]);
    expect(LOG_TIME()).toBe(pino.stdTimeFunctions.isoTime());
    expect(() =>
      atLogTime(then, () => {
        throw new Error('write failed');
      }),
    ).toThrow('write failed');
    expect(LOG_TIME()).toBe(pino.stdTimeFunctions.isoTime());
    // Nested: the inner date holds inside, the outer one again after it.
    const nested: string[] = [];
    atLogTime(then, () => {
      atLogTime(now, () => nested.push(LOG_TIME()));
      nested.push(LOG_TIME());
    });
    expect(nested).toEqual([pino.stdTimeFunctions.isoTime(), expected]);
  });
});
