import { idKey } from '../../src/lib/id-key';

test('a UUID becomes its 16 bytes; other ids stay apart from every packed UUID; equal ids give equal keys', () => {
  const uuid = '0a1b2c3d-4e5f-8a6b-9c7d-8e9f0a1b2c3d';
  const packed = idKey(uuid);
  expect(packed).toHaveLength(16);
  expect(packed).toBe(Buffer.from('0a1b2c3d4e5f8a6b9c7d8e9f0a1b2c3d', 'hex').toString('latin1'));
  expect(idKey(`x${uuid}`.slice(1))).toBe(packed);
  // A plain id spelling a packed key is not that key.
  expect(idKey(packed)).not.toBe(packed);
  expect(idKey(uuid.toUpperCase())).not.toBe(packed);
  expect(idKey('r-1')).toBe(idKey('r-1'));
  expect(idKey('r-1')).not.toBe(idKey('r-2'));
  // Lone surrogates are kept as they are: two such ids stay distinct.
  expect(idKey('a\ud800')).not.toBe(idKey('a\ud801'));
});
