import { Sealer } from '../../src/lib/seal';

const SECRET = 'x'.repeat(32);

describe('Sealer', () => {
  it('opens what it sealed for the same stream, and hides the key', () => {
    const s = new Sealer(SECRET);
    const box = s.seal('sk-live-123', 'stream-1');
    expect(box).not.toContain('sk-live-123');
    expect(s.open(box, 'stream-1')).toBe('sk-live-123');
    // A fresh IV each time: two seals of one key differ.
    expect(s.seal('sk-live-123', 'stream-1')).not.toBe(box);
  });

  it('refuses another stream, another secret, a tampered or malformed box', () => {
    const s = new Sealer(SECRET);
    const box = s.seal('sk-live-123', 'stream-1');
    expect(s.open(box, 'stream-2')).toBeUndefined();
    expect(new Sealer('y'.repeat(32)).open(box, 'stream-1')).toBeUndefined();
    const [v, iv, body] = box.split('.');
    const flipped = Buffer.from(body!, 'base64url');
    flipped[0] ^= 1;
    expect(s.open(`${v}.${iv}.${flipped.toString('base64url')}`, 'stream-1')).toBeUndefined();
    for (const bad of ['', 'v1', 'v2.a.b', 'v1..', 'v1.AAAA.AAAA', box.slice(0, -4)]) expect(s.open(bad, 'stream-1')).toBeUndefined();
  });

  it('refuses a secret shorter than 32 characters', () => {
    expect(() => new Sealer('short')).toThrow(/at least 32/);
  });
});
